//go:build !linux

package httpapi_test

import "time"

func preciseTimers() {}

func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
