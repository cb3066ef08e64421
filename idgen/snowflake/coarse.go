package snowflake

import (
	"sync"
	"sync/atomic"
	"time"
)

// CoarseResolution is how often CoarseNow's background goroutine reads the
// clock.
const CoarseResolution = 250 * time.Microsecond

var coarse struct {
	once sync.Once
	now  atomic.Pointer[time.Time]
}

// CoarseNow is a clock for Settings.Now that returns a reading of
// time.Now taken at most about CoarseResolution ago (later under heavy
// load) by one background goroutine, started on first use and kept for
// the life of the process. Reading it costs an atomic load instead of a
// clock read, which on virtual machines is most of what an id costs; in
// exchange an id's time may lag the clock by that much, as may the
// generator's own deadlines, which its lease's guard (a tenth of the TTL)
// covers many times over. Java Snowflake ports do the same with a cached
// "SystemClock".
func CoarseNow() time.Time {
	coarse.once.Do(func() {
		t := time.Now()
		coarse.now.Store(&t)
		go func() {
			tk := time.NewTicker(CoarseResolution)
			for range tk.C {
				t := time.Now()
				coarse.now.Store(&t)
			}
		}()
	})
	return *coarse.now.Load()
}
