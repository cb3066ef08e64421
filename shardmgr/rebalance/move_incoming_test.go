package rebalance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// hammer inserts into tables of one shard on every host of the
// cluster directly, bypassing the map, as an application with a stale map
// (or none) would, until stop is called. It keeps every id a host
// acknowledged.
type hammer struct {
	mu   sync.Mutex
	ids  map[string][]int64 // host -> ids acknowledged
	errs int
	stop func()
}

func hammerShard(t *testing.T, cfg *shardmgr.Config, schema string, tables []string, perHost int) *hammer {
	h := &hammer{ids: map[string][]int64{}}
	c, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, host := range cfg.Hosts {
		p := clustertest.HostPool(t, cfg, host.Name)
		for i := range perHost {
			wg.Go(func() {
				for j := 0; c.Err() == nil; j++ {
					insert := fmt.Sprintf(`INSERT INTO %s (user_id, post_id) VALUES ($1, $2) RETURNING id`, pgx.Identifier{schema, tables[j%len(tables)]}.Sanitize())
					var id int64
					err := p.QueryRow(c, insert, i, j).Scan(&id)
					h.mu.Lock()
					if err == nil {
						h.ids[host.Name] = append(h.ids[host.Name], id)
					} else {
						h.errs++
					}
					h.mu.Unlock()
					if err != nil {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
	}
	h.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(h.stop)
	return h
}

// TestMoveIncomingCopyRefusesWrites writes to a shard on every host,
// around the map, while it moves away and straight back to the host that
// held it before (whose old copy is retired): every id a host acknowledged
// is on the shard's host afterwards. An incoming copy refuses writes from
// the moment its schema exists, so a write to it fails rather than being
// acknowledged and then wiped by the move.
func TestMoveIncomingCopyRefusesWrites(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 8)
	// The sample migrations, and a table made by a migration that runs
	// without a transaction, with random ids (which no clamp of the
	// generator stops).
	files := map[string]string{"003_tags.sql": `---- tern: disable-tx ----
CREATE TABLE {{.schema}}.tags (id bigint PRIMARY KEY DEFAULT (random() * 9e18)::bigint, user_id bigint NOT NULL, post_id bigint NOT NULL);
CREATE INDEX CONCURRENTLY tags_post_idx ON {{.schema}}.tags (post_id);`}
	for _, name := range []string{"001_create_likes.sql", "002_add_likes_post_index.sql"} {
		b, err := os.ReadFile(filepath.Join(clustertest.SampleMigrations, name))
		require.NoError(t, err)
		files[name] = string(b)
	}
	set := setOf(t, files)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	for _, tc := range []struct {
		mode  MoveMode
		shard int
	}{{MoveOnline, 7}, {MoveOffline, 6}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			routeLikes(t, r, tc.shard, 200)
			before := likeIDs(t, cfg, tc.shard)
			m := clustertest.ClusterMap(t, cfg)
			home := m.Shards[tc.shard].Host
			away := "pg3"
			if home == away {
				away = "pg2"
			}
			h := hammerShard(t, cfg, m.Shards[tc.shard].Schema, []string{"likes", "tags"}, 2)
			opts := MoveOptions{Mode: tc.mode, Migrations: set, Keep: new(time.Duration)}
			_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), tc.shard, away, opts)
			require.NoError(t, err)
			_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), tc.shard, home, opts)
			require.NoError(t, err)
			h.stop()

			require.Equal(t, home, clustertest.ClusterMap(t, cfg).Shards[tc.shard].Host)
			got := append(likeIDs(t, cfg, tc.shard), shardIDs(t, cfg, tc.shard, "tags")...)
			slices.Sort(got)
			want := slices.Clone(before)
			for host, ids := range h.ids {
				t.Logf("%s: %s acknowledged %d inserts", tc.mode, host, len(ids))
				want = append(want, ids...)
			}
			t.Logf("%s: %d inserts failed", tc.mode, h.errs)
			slices.Sort(want)
			var lost []int64
			for _, id := range want {
				if _, ok := slices.BinarySearch(got, id); !ok {
					lost = append(lost, id)
				}
			}
			require.Zero(t, len(lost), "%d ids acknowledged by a host and then lost, among them %v", len(lost), lost[:min(len(lost), 5)])
		})
	}
	requireVerifyOK(t, cfg)
}

// shardIDs reads the ids of shard's table from the host the catalog
// places it on.
func shardIDs(t testing.TB, cfg *shardmgr.Config, shard int, table string) []int64 {
	t.Helper()
	m := clustertest.ClusterMap(t, cfg)
	rows, err := clustertest.HostPool(t, cfg, m.Shards[shard].Host).Query(clustertest.Ctx(t), `SELECT id FROM `+pgx.Identifier{m.Shards[shard].Schema, table}.Sanitize())
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// Until the flip the incoming copy's generator hands out no id and its
// tables refuse writes, after the schema is built and after the counter
// was carried over; after the flip it serves.
func TestMoveIncomingCopyHandsOutNoID(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 50)
	dst := clustertest.HostPool(t, cfg, "pg3")
	for _, phase := range []Phase{PhaseSchema, PhaseVerified} {
		opts := MoveOptions{Migrations: sampleSet(t)}
		opts.stopAfter = phase
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg3", opts)
		require.ErrorIs(t, err, errStopped)
		_, err = dst.Exec(clustertest.Ctx(t), `SELECT shard_0001.next_id()`)
		require.ErrorContains(t, err, "maximum value", "after %s", phase)
		_, err = dst.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (id, user_id, post_id) VALUES (1, 1, 1)`)
		require.True(t, fence.IsFenceError(err), "after %s: %v", phase, err)
	}
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg3", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	old := likeIDs(t, cfg, 1)
	routeLikes(t, r, 1, 5)
	ids := likeIDs(t, cfg, 1)
	require.Len(t, ids, len(old)+5)
	require.Greater(t, ids[len(old)], old[len(old)-1])
	requireVerifyOK(t, cfg)
}

// A flip that opened the target and then failed in the catalog fences the
// target again before the source is given back: never two writable copies.
func TestFailedFlipFencesTargetAgain(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	r := openRouter(t, cfg, shardmgr.WithRefreshInterval(0))
	routeLikes(t, r, 1, 50)
	home, err := r.Shard(1)
	require.NoError(t, err)
	require.NotEqual(t, "pg3", home.Host)
	src, dst := clustertest.HostPool(t, cfg, home.Host), clustertest.HostPool(t, cfg, "pg3")
	for _, mode := range []MoveMode{MoveOnline, MoveOffline} {
		opts := MoveOptions{Migrations: sampleSet(t), Mode: mode}
		opts.flipCatalog = func() error { return errors.New("catalog lost") }
		_, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg3", opts)
		require.ErrorContains(t, err, "catalog lost", mode)
		// The source serves again; the target refuses writes and ids.
		routeLikes(t, r, 1, 5)
		_, err = dst.Exec(clustertest.Ctx(t), `SELECT shard_0001.next_id()`)
		require.ErrorContains(t, err, "maximum value", mode)
		_, err = dst.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (id, user_id, post_id) VALUES (1, 1, 1)`)
		require.True(t, fence.IsFenceError(err), "%s: %v", mode, err)
		_, err = src.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.likes (user_id, post_id) VALUES (1, 1)`)
		require.NoError(t, err, mode)
		_, err = AbortMove(clustertest.Ctx(t), clustertest.Handle(t, cfg), []int{1})
		require.NoError(t, err, mode)
	}
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 1, "pg3", MoveOptions{Migrations: sampleSet(t)})
	require.NoError(t, err)
	routeLikes(t, r, 1, 5)
	requireVerifyOK(t, cfg)
}
