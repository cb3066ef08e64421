package logbuf_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/logbuf"
)

// Loggers on many goroutines write whole lines into one Buffer while it
// is read (go test -race holds the reads and writes apart).
func TestBufferTakesConcurrentLines(t *testing.T) {
	var buf logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				log.Warn("line", "writer", i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	require.Len(t, buf.Lines("level=WARN msg=line writer="), 800)
	require.Len(t, buf.Lines("writer=7"), 100)
	require.Empty(t, buf.Lines("level=INFO"))
}
