package rebalance

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// watchHandler passes records on and closes seen the first time one says
// msg: a test waits for a line the mover logs, not for a while.
type watchHandler struct {
	slog.Handler
	msg  string
	once *sync.Once
	seen chan struct{}
}

func (h watchHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return h.Handler.Handle(ctx, r)
}

func (h watchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h watchHandler) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// watchLogger is testLogger that closes the returned channel when a
// record says msg.
// restartWhenWaiting starts s again once waiting is closed (the code
// logged that it waits for the server) or, when nothing waits, once the
// operation has returned: the caller calls the function it returns right
// after the operation, and gets the restart's error.
func restartWhenWaiting(ctx context.Context, s *localpg.Server, waiting <-chan struct{}) (returned func() error) {
	done := make(chan struct{})
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-waiting:
		case <-done:
		}
		restarted <- s.Restart(ctx)
	}()
	return func() error {
		close(done)
		return <-restarted
	}
}

func watchLogger(t testing.TB, msg string) (*slog.Logger, <-chan struct{}) {
	seen := make(chan struct{})
	return slog.New(watchHandler{Handler: testLogger(t).Handler(), msg: msg, once: &sync.Once{}, seen: seen}), seen
}

// A source restarted while `rebalance apply --parallel 2` moves two of its
// shards (here: stopped as soon as one of them is fenced, and started
// again once the give-back waits for it) is given back before Apply
// returns: no shard stays moving in the catalog or fenced on the source,
// and the failed moves finish on the next run with every row. Failed
// before: the give-back tried once while the source was down, and the
// shard stayed fenced (catalog state moving, ErrSourceFenced) until the
// next run.
func TestApplyGivesBackASourceThatRestarted(t *testing.T) {
	t.Parallel()
	ctx := clustertest.Ctx(t)
	cfg, s := workerCluster(t, 6, map[string]string{"wal_retrieve_retry_interval": "100ms"})
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	moved := []int{0, 1}
	for _, shard := range moved {
		routeLikes(t, r, shard, 40)
		_, err := MoveShard(ctx, clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)})
		require.NoError(t, err)
	}
	want := map[int][]int64{}
	for _, shard := range moved {
		want[shard] = likeIDs(t, cfg, shard)
	}
	// pg4, the server this test may stop, is drained: both its shards
	// move off it at once.
	for i := range cfg.Hosts {
		if cfg.Hosts[i].Name == "pg4" {
			cfg.Hosts[i].Drain = true
		}
	}
	applyHosts(t, cfg)

	logger, waiting := watchLogger(t, giveBackWaitsMsg)
	opts := ApplyOptions{Parallel: 2, Move: MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration),
		CatchupTimeout: 5 * time.Minute, Logger: logger}}
	halted := make(chan struct{})
	var once sync.Once
	opts.Move.afterFence = func(int) {
		once.Do(func() {
			if err := s.Halt(); err != nil {
				t.Errorf("halt pg4: %v", err)
			}
			close(halted)
		})
	}
	done := make(chan struct{})
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-halted:
		case <-done:
			restarted <- nil
			return
		}
		// Started again once the give-back waits for it, or, when
		// nothing waits, once Apply has returned.
		select {
		case <-waiting:
		case <-done:
		}
		restarted <- s.Restart(ctx)
	}()
	c, err := cluster.Open(ctx, cfg)
	require.NoError(t, err)
	res, err := Apply(ctx, c, opts)
	close(done)
	c.Close()
	require.NoError(t, <-restarted)
	select {
	case <-halted:
	default:
		t.Fatal("no move of pg4's shards reached its fence")
	}
	require.NotNil(t, res, "%v", err)
	require.Error(t, err, "the move whose source stopped failed")
	require.NotErrorIs(t, err, ErrSourceFenced)
	for _, mv := range res.Moves {
		require.Equal(t, "pg4", mv.From)
	}

	// The source is up again: every shard is active in the catalog and
	// takes writes there.
	clustertest.Reopen(t, cfg)
	m := clustertest.ClusterMap(t, cfg)
	for _, sh := range m.Shards {
		require.Equal(t, shardmgr.StateActive, sh.State, "shard %d on %s", sh.ID, sh.Host)
	}
	r2 := openRouter(t, cfg)
	for _, shard := range moved {
		routeLikes(t, r2, shard, 1)
		want[shard] = likeIDs(t, cfg, shard)
	}

	// The next run finishes the moves, every row with them.
	_, err = Apply(ctx, clustertest.Handle(t, cfg), ApplyOptions{Parallel: 2, Move: MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)}})
	require.NoError(t, err)
	m = clustertest.ClusterMap(t, cfg)
	for _, shard := range moved {
		require.NotEqual(t, "pg4", m.Shards[shard].Host)
		require.Equal(t, want[shard], likeIDs(t, cfg, shard), "shard %d", shard)
	}
	requireVerifyOK(t, cfg)
}
