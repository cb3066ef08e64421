// Package logbuf is a log that several goroutines write while a test
// reads it: a logger's handler called from the code's goroutines, or
// os/exec copying a process's output. A test that reads a bare
// bytes.Buffer or strings.Builder meanwhile races with the writers.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer whose writes and reads hold one lock. The zero
// value is ready to use; it must not be copied after first use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p. It never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Lines returns the lines written so far that contain s ("level=WARN",
// a message), in order.
func (l *Buffer) Lines(s string) []string {
	var out []string
	for line := range strings.SplitSeq(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
