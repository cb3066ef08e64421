package segment_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
)

// A value an option cannot use fails New with ErrConfig naming the
// option; WithLogger(nil) is one, as in every package (shardmgr's
// doc.go). Failed before: WithLogger(nil) was taken as a nil logger, and
// a bad breaker or timeout failed with one message for four options.
func TestOptionsAreCheckedAndNamed(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // lazy: never dialled
	require.NoError(t, err)
	defer pool.Close()
	for name, opt := range map[string]segment.Option{
		"WithLogger(nil)":         segment.WithLogger(nil),
		"WithClock(nil)":          segment.WithClock(nil),
		"WithPrepare(nil)":        segment.WithPrepare(nil),
		"WithBreakerHook(nil)":    segment.WithBreakerHook(nil),
		"WithBreaker(0, 1s)":      segment.WithBreaker(0, time.Second),
		"WithBreaker(3, 0s)":      segment.WithBreaker(3, 0),
		"WithCallTimeout(0s)":     segment.WithCallTimeout(0),
		"WithPrepareTimeout(-1s)": segment.WithPrepareTimeout(-time.Second),
	} {
		a, err := segment.New([]*pgxpool.Pool{pool}, map[string]segment.TagConfig{"order": {}}, opt)
		require.Nil(t, a, name)
		require.ErrorIs(t, err, segment.ErrConfig, name)
		require.ErrorContains(t, err, name+": want ")
	}
}
