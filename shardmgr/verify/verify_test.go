package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	shsql "github.com/shardid/shardid/sql"
)

// sixShards is a small cluster: pg1 holds shards 0-1, pg2 2-3, pg3 4-5,
// each with a table items whose ids come from the shard's generator and
// five rows in it.
func sixShards(t *testing.T) (*shardmgr.Config, *shardmgr.ShardMap) {
	t.Helper()
	cfg := installtest.Cluster(t, 6)
	m, err := shardmgr.ReadMap(clustertest.Ctx(t), clustertest.Pool(t, cfg.Catalog))
	require.NoError(t, err)
	for _, s := range m.Shards {
		exec(t, cfg, s.Host, fmt.Sprintf(`CREATE TABLE %[1]s.items (id bigint PRIMARY KEY DEFAULT %[1]s.next_id(), v text);
			INSERT INTO %[1]s.items (v) SELECT 'row ' || g FROM generate_series(1, 5) g`, s.Schema))
	}
	return cfg, m
}

func exec(t *testing.T, cfg *shardmgr.Config, host, sql string, args ...any) {
	t.Helper()
	_, err := clustertest.HostPool(t, cfg, host).Exec(clustertest.Ctx(t), sql, args...)
	require.NoError(t, err, sql)
}

func render(t *testing.T, p shsql.Params) string {
	t.Helper()
	ddl, err := shsql.Render(p)
	require.NoError(t, err)
	return ddl
}

func TestVerifyHealthy(t *testing.T) {
	t.Parallel()
	cfg, _ := sixShards(t)
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Equal(t, 6, rep.Shards)
	require.Equal(t, 3, rep.Hosts)
	require.Equal(t, 6*16, rep.ProbeIDs)
	require.Contains(t, rep.Checks, CheckDuplicateID)

	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true,"problems":[],"generators":[{"kind":"plpgsql","count":6,"shards":"0-5"}]}`, string(b))
}

func TestVerifyFindsEveryProblem(t *testing.T) {
	t.Parallel()
	type want struct {
		check string
		shard int
		host  string
	}
	cases := []struct {
		name   string
		break_ func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options
		want   want
	}{
		{"stray copy on a second host", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 1}))
			return Options{}
		}, want{CheckPlacement, 1, "pg2"}},
		{"generator in another schema on a second host", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 0, Schema: "app_ids"}))
			return Options{}
		}, want{CheckPlacement, 0, "pg3"}},
		{"shard schema missing from its host", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg3", "DROP SCHEMA shard_0005 CASCADE")
			return Options{}
		}, want{CheckPlacement, 5, "pg3"}},
		{"shard beyond the shard count", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg1", "CREATE SCHEMA shard_0070")
			return Options{}
		}, want{CheckPlacement, 70, "pg1"}},
		{"host does not record its shard", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "DELETE FROM shardid.local_shards WHERE shard = 3")
			return Options{}
		}, want{CheckHostRecord, 3, "pg2"}},
		{"host records a shard of another host", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "INSERT INTO shardid.local_shards VALUES (4, 'shard_0004', 'active', 1)")
			return Options{}
		}, want{CheckHostRecord, 4, "pg2"}},
		{"host recorded a generation the catalog has not reached", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg1", "UPDATE shardid.local_shards SET generation = generation + 1000 WHERE shard = 0")
			return Options{}
		}, want{CheckCatalogStale, -1, "pg1"}},
		{"host belongs to another cluster", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg3", "UPDATE shardid.host_info SET cluster = 'other'")
			return Options{}
		}, want{CheckHost, -1, "pg3"}},
		{"generator with the wrong shard id", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 3, Schema: "shard_0002"}))
			return Options{}
		}, want{CheckGenerator, 2, "pg2"}},
		{"generator returning another shard id (marker intact)", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 3, Schema: "shard_0002"}))
			marker, err := shsql.Marker(shsql.Params{Shard: 2})
			require.NoError(t, err)
			exec(t, cfg, "pg2", fmt.Sprintf("COMMENT ON FUNCTION shard_0002.next_id() IS '%s'", marker))
			return Options{}
		}, want{CheckGeneratorID, 2, "pg2"}},
		{"generator with another epoch (marker intact)", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 4, Epoch: shsql.DefaultEpoch - 3_600_000}))
			marker, err := shsql.Marker(shsql.Params{Shard: 4})
			require.NoError(t, err)
			exec(t, cfg, "pg3", fmt.Sprintf("COMMENT ON FUNCTION shard_0004.next_id() IS '%s'", marker))
			return Options{}
		}, want{CheckGeneratorID, 4, "pg3"}},
		{"generator of the wrong variant", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 5, Variant: shsql.Instagram}))
			return Options{}
		}, want{CheckGenerator, 5, "pg3"}},
		{"generator missing", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg1", "DROP FUNCTION shard_0001.next_id() CASCADE")
			return Options{}
		}, want{CheckGenerator, 1, "pg1"}},
		{"next_id_advance executable by PUBLIC", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "GRANT EXECUTE ON FUNCTION shard_0003.next_id_advance(bigint, boolean) TO PUBLIC")
			return Options{}
		}, want{CheckGenerator, 3, "pg2"}},
		{"generator without a marker", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg1", "COMMENT ON FUNCTION shard_0000.next_id() IS NULL")
			return Options{}
		}, want{CheckGenerator, 0, "pg1"}},
		{"rewound sequence", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg1", "SELECT setval('shard_0000.next_id_counter', 1)")
			return Options{}
		}, want{CheckCounter, 0, "pg1"}},
		{"sequence with CACHE 20", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "ALTER SEQUENCE shard_0003.next_id_counter CACHE 20")
			return Options{}
		}, want{CheckSequence, 3, "pg2"}},
		{"sequence with CYCLE", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "ALTER SEQUENCE shard_0002.next_id_counter CYCLE")
			return Options{}
		}, want{CheckSequence, 2, "pg2"}},
		{"sequence missing", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", "DROP SEQUENCE shard_0002.next_id_counter CASCADE")
			return Options{}
		}, want{CheckSequence, 2, "pg2"}},
		{"leaked advisory lock", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			conn, err := pgx.Connect(clustertest.Ctx(t), hostDSN(cfg, "pg3"))
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close(context.Background()) })
			_, err = conn.Exec(clustertest.Ctx(t), "SELECT pg_advisory_lock_shared($1, 4)", int64(shsql.LockClass))
			require.NoError(t, err)
			return Options{}
		}, want{CheckLock, 4, "pg3"}},
		{"manager clock off", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			return Options{Now: func() time.Time { return time.Now().Add(-5 * time.Second) }}
		}, want{CheckClock, -1, "pg1"}},
		{"host clocks disagree", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			return Options{MaxClockSkew: 2 * time.Second, hostClock: func(host string, now time.Time) time.Time {
				switch host {
				case "pg2":
					return now.Add(1500 * time.Millisecond)
				case "pg3":
					return now.Add(-1500 * time.Millisecond)
				}
				return now
			}}
		}, want{CheckClock, -1, "pg2"}},
		{"probe finds duplicate ids across shards", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			// Two generators stamping shard 5 with a frozen clock: both
			// return the same ids in the same order.
			frozen := "1400000000000::bigint"
			exec(t, cfg, "pg1", render(t, shsql.Params{Shard: 5, Schema: "shard_0001", Variant: shsql.Instagram, Clock: frozen}))
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 5, Variant: shsql.Instagram, Clock: frozen}))
			return Options{}
		}, want{CheckProbe, 1, "pg1"}},
		{"id copied into the wrong shard", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			var id int64
			require.NoError(t, clustertest.HostPool(t, cfg, "pg1").QueryRow(clustertest.Ctx(t), "SELECT max(id) FROM shard_0000.items").Scan(&id))
			exec(t, cfg, "pg2", "INSERT INTO shard_0003.items (id, v) VALUES ($1, 'copied')", id)
			return Options{Deep: true}
		}, want{CheckStoredShard, 3, "pg2"}},
		{"id copied into the wrong shard is a duplicate", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			var id int64
			require.NoError(t, clustertest.HostPool(t, cfg, "pg1").QueryRow(clustertest.Ctx(t), "SELECT max(id) FROM shard_0000.items").Scan(&id))
			exec(t, cfg, "pg2", "INSERT INTO shard_0003.items (id, v) VALUES ($1, 'copied')", id)
			return Options{Deep: true}
		}, want{CheckDuplicateID, 0, "pg1"}},
		{"id stored twice within one shard", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			exec(t, cfg, "pg2", `CREATE TABLE shard_0002.archive (id bigint DEFAULT shard_0002.next_id());
				INSERT INTO shard_0002.archive SELECT id FROM shard_0002.items LIMIT 1`)
			return Options{Deep: true}
		}, want{CheckDuplicateID, 2, "pg2"}},
		{"catalog disagrees with the cluster file", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			cfg.Cluster = "renamed"
			return Options{}
		}, want{CheckCatalog, -1, ""}},
		{"host unreachable", func(t *testing.T, cfg *shardmgr.Config, m *shardmgr.ShardMap) Options {
			cfg.Hosts[1].DSN = "postgres://postgres@127.0.0.1:1/nothing?connect_timeout=2"
			return Options{}
		}, want{CheckHost, -1, "pg2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, m := sixShards(t)
			opts := tc.break_(t, cfg, m)
			rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), opts)
			require.NoError(t, err)
			require.False(t, rep.OK)
			var got []want
			for _, p := range rep.Problems {
				got = append(got, want{p.Check, p.Shard, p.Host})
			}
			require.Contains(t, got, tc.want, "problems: %v", rep.Problems)
			for _, p := range rep.Problems {
				t.Logf("%s", p)
			}
		})
	}
}

func hostDSN(cfg *shardmgr.Config, name string) string {
	h, _ := cfg.Host(name)
	return h.DSN
}

// After a legitimate next_id_advance the counter runs ahead of the clock
// and waits for it: verify says so in a note and passes, where it used to
// fail with a misleading "wrong epoch or layout?". A generator following a
// clock of its own (another epoch, marker intact) still fails:
// TestVerifyFindsEveryProblem.
func TestVerifyAdvancedCounterIsANote(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	ahead := clustertest.FutureID(1, 10*time.Minute, 0)
	exec(t, cfg, m.Shards[1].Host, "SELECT shard_0001.next_id_advance($1)", ahead)
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "problems: %v", rep.Problems)
	require.Len(t, rep.Notes, 1, "%v", rep.Notes)
	n := rep.Notes[0]
	require.Equal(t, [3]any{CheckGeneratorID, 1, m.Shards[1].Host}, [3]any{n.Check, n.Shard, n.Host})
	require.Contains(t, n.Detail, "ahead of the host's clock and waits for it (advanced by next_id_advance")
	require.Regexp(t, `counter is 9m5\d\.\d+s ahead`, n.Detail)
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.Contains(t, string(b), `"notes":[{"check":"generator-id","shard":1`)
}

// Issue 10, item 3: any role that can connect can take a generator's
// exclusive advisory lock (one namespace per database) and freeze the
// shard's inserts. verify does not hang on it: it names the holder, for a
// lock held when it scans the host and for one taken while it runs (its
// generator call waits out the lock timeout).
func TestVerifyReportsBlockedGeneratorWithinBound(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	host := m.Shards[0].Host
	require.Equal(t, host, m.Shards[1].Host)
	holder := func(app string) (*pgx.Conn, int32) {
		c, err := pgx.ParseConfig(hostDSN(cfg, host))
		require.NoError(t, err)
		c.RuntimeParams["application_name"] = app
		conn, err := pgx.ConnectConfig(clustertest.Ctx(t), c)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		var pid int32
		require.NoError(t, conn.QueryRow(clustertest.Ctx(t), "SELECT pg_backend_pid()").Scan(&pid))
		return conn, pid
	}
	early, earlyPID := holder("mallory")
	_, err := early.Exec(clustertest.Ctx(t), "SELECT pg_advisory_lock($1, 0)", int64(shsql.LockClass))
	require.NoError(t, err)
	late, latePID := holder("late-mallory")

	start := time.Now()
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{LockTimeout: time.Second, afterScan: func() {
		_, err := late.Exec(context.Background(), "SELECT pg_advisory_lock($1, 1)", int64(shsql.LockClass))
		require.NoError(t, err)
	}})
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.Less(t, elapsed, 20*time.Second, "verify is bounded")
	byShard := map[int]Problem{}
	for _, p := range rep.Failed(CheckLock) {
		byShard[p.Shard] = p
		t.Logf("%s", p)
	}
	require.Equal(t, host, byShard[0].Host)
	require.Contains(t, byShard[0].Detail, fmt.Sprintf("pid %d", earlyPID))
	require.Contains(t, byShard[0].Detail, `application "mallory"`)
	require.Contains(t, byShard[0].Detail, fmt.Sprintf("pg_terminate_backend(%d)", earlyPID))
	require.Equal(t, host, byShard[1].Host)
	require.Contains(t, byShard[1].Detail, "lock timeout")
	require.Contains(t, byShard[1].Detail, fmt.Sprintf("pid %d", latePID))
	require.Contains(t, byShard[1].Detail, `application "late-mallory"`)
	for _, p := range rep.Problems {
		require.Contains(t, []int{0, 1}, p.Shard, "only the blocked shards fail: %v", p)
	}
}

// verify returns within a bound, with a problem for the host, when a host's
// server is stopped and when a host accepts connections but never answers.
func TestVerifyBoundedWithHostsDown(t *testing.T) {
	t.Parallel()
	cfg := clustertest.Cluster(t, 4, false)
	own := pgtest.Own(t, localpg.Options{})
	cfg.Hosts[2].DSN = own.DSN(fmt.Sprintf("sm%d_own", clustertest.DBCounter.Add(1)))
	_, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	require.NoError(t, own.Halt())

	// pg2: a listener that accepts and never speaks.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	cfg.Hosts[1].DSN = fmt.Sprintf("postgres://postgres@%s/nothing?connect_timeout=3", ln.Addr())

	start := time.Now()
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	elapsed := time.Since(start)
	require.NoError(t, err)
	require.Less(t, elapsed, 20*time.Second, "verify is bounded")
	var hosts []string
	for _, p := range rep.Failed(CheckHost) {
		hosts = append(hosts, p.Host)
		t.Logf("%s", p)
	}
	require.ElementsMatch(t, []string{"pg2", "pg3"}, hosts)
}

// With the C generator a session holding a shard's exclusive advisory lock
// blocks no insert (next_id() takes no advisory lock): verify probes the
// shard, passes, and notes the session, which still holds up
// next_id_advance and a move's clamp.
func TestVerifyHeldLockDoesNotBlockTheCGenerator(t *testing.T) {
	t.Parallel()
	pgtest.SkipWithoutCGenerator(t, pgtest.Servers(t, 1)[0])
	cfg, m := sixShards(t)
	cfg.Generator = shsql.GeneratorC
	_, err := install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	holder, err := pgx.Connect(clustertest.Ctx(t), hostDSN(cfg, m.Shards[0].Host))
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close(context.Background()) })
	_, err = holder.Exec(clustertest.Ctx(t), "SELECT pg_advisory_lock($1, 0)", int64(shsql.LockClass))
	require.NoError(t, err)
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{LockTimeout: time.Second})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Len(t, rep.Notes, 1, "%v", rep.Notes)
	require.Equal(t, CheckLock, rep.Notes[0].Check)
	require.Equal(t, 0, rep.Notes[0].Shard)
	require.Contains(t, rep.Notes[0].Detail, "does not wait for it")
	require.Equal(t, []GeneratorCount{{Kind: GeneratorC, Count: 6, Shards: "0-5"}}, rep.Generators)
}
