//go:build linux

package httpapi_test

import (
	"syscall"
	"time"
)

// preciseTimers sets the calling thread's timer slack to 1 ns (from
// Linux's default 50 µs), so that sleepUntil wakes on time.
func preciseTimers() {
	const prSetTimerslack = 29
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
}

// sleepUntil blocks the calling thread in nanosleep until t.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		syscall.Nanosleep(&ts, nil)
	}
}
