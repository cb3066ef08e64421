package rebalance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// While a table is copied, the rows copied so far reach the journal
// (rows_copied: rebalance status --json, the console) every
// copyProgressEvery, online and offline: the copy is held after its
// 5,000th row until the journal shows rows, and a journal that shows
// none within a minute fails the test (issue 29: it showed 0 rows for
// the whole copy, then jumped). Failed before: the journal said 0 until
// the copy ended. An offline move copies into a table without its
// indexes, built after the rows are in, as an online move does (issue
// 29: 3.6x a raw pipe into a table with its indexes): the indexes the
// target's likes has after the move are not those it had during the
// copy; failed before (offline: the same two, filled row by row).
func TestMoveJournalsRowsDuringTheCopy(t *testing.T) {
	t.Parallel()
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			const rows, holdAt = 20_000, 5_000
			cfg := moveCluster(t, 3)
			routeLikes(t, openRouter(t, cfg), 0, rows)
			h := clustertest.Handle(t, cfg)
			dst := clustertest.HostPool(t, cfg, "pg4")
			ctx := clustertest.Ctx(t)

			var journaled atomic.Int64
			var during []uint32
			var failure error
			var once sync.Once
			opts := MoveOptions{Mode: mode, Migrations: sampleSet(t), Keep: new(time.Duration)}
			opts.copyProgressEvery = 50 * time.Millisecond
			opts.copyRow = func(n int64) {
				if n != holdAt {
					return
				}
				once.Do(func() {
					failure = holdUntil(ctx, time.Minute, func() (bool, error) {
						recs, err := Moves(ctx, h, false)
						if err != nil || len(recs) != 1 {
							return false, err
						}
						journaled.Store(recs[0].Rows)
						return recs[0].Rows > 0, nil
					})
					if failure == nil {
						during, failure = likesIndexes(ctx, dst)
					}
				})
			}
			res, err := MoveShard(ctx, h, 0, "pg4", opts)
			require.NoError(t, err)
			require.NoError(t, failure)
			require.EqualValues(t, rows, res.Rows)
			require.Positive(t, journaled.Load(), "the journal's rows while the copy was held at row %d", holdAt)
			require.Less(t, journaled.Load(), int64(rows))
			after, err := likesIndexes(ctx, dst)
			require.NoError(t, err)
			require.Len(t, after, 2, "likes_pkey and likes_post_id_idx")
			for _, oid := range during {
				require.NotContains(t, after, oid, "an index of likes the target had during the copy (as others saw it) is still there: it was filled row by row, not built after")
			}
			requireVerifyOK(t, cfg)
		})
	}
}

// likesIndexes are the OIDs of the indexes of shard_0000.likes on q's
// host.
func likesIndexes(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]uint32, error) {
	rows, err := q.Query(ctx, `SELECT indexrelid::oid FROM pg_catalog.pg_index WHERE indrelid = 'shard_0000.likes'::regclass`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uint32])
}

// holdUntil polls ok every 20 ms until it reports true, fails, or limit
// passes.
func holdUntil(ctx context.Context, limit time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, err := ok()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("not within " + limit.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// The session holding an online move's snapshot sits idle in transaction
// for the whole copy: a source database with
// idle_in_transaction_session_timeout = 500ms no longer ends it (each
// table's copy here takes the snapshot after 3 s), and when the session
// is ended anyway (the test lets the server's setting through to it) the
// move's error names the setting (ErrSnapshotLost), where it said only
// "invalid snapshot identifier" (issue 28). The second part failed
// before.
func TestMoveSnapshotOutlivesIdleTimeout(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "timeout off", true: "timeout kept"}[keep], func(t *testing.T) {
			t.Parallel()
			cfg := moveCluster(t, 3)
			routeLikes(t, openRouter(t, cfg, shardmgr.WithRefreshInterval(20*time.Millisecond)), 0, 1_000)
			ctx := clustertest.Ctx(t)
			src := clustertest.HostPool(t, cfg, clustertest.ClusterMap(t, cfg).Shards[0].Host)
			var db string
			require.NoError(t, src.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
			_, err := src.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET idle_in_transaction_session_timeout = '500ms'`)
			require.NoError(t, err)

			opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)}
			opts.keepServerTimeouts = keep
			var once sync.Once
			opts.beforeSnapshot = func() {
				// 3 s, six times the timeout, or until the source's
				// walsender of this database is gone.
				once.Do(func() {
					_ = holdUntil(ctx, 3*time.Second, func() (bool, error) {
						var n int
						err := src.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender' AND datname = $1`, db).Scan(&n)
						return err == nil && n == 0, nil
					})
				})
			}
			res, err := MoveShard(ctx, clustertest.Handle(t, cfg), 0, "pg4", opts)
			if keep {
				require.ErrorIs(t, err, ErrSnapshotLost)
				require.ErrorContains(t, err, "idle_in_transaction_session_timeout")
				_, err = AbortMove(ctx, clustertest.Handle(t, cfg), []int{0})
				require.NoError(t, err, "the slot and the target's copy go")
				return
			}
			require.NoError(t, err)
			require.EqualValues(t, 1_000, res.Rows)
			requireVerifyOK(t, cfg)
		})
	}
}
