package shardmgr

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	shsql "github.com/shardid/shardid/sql"
	"github.com/stretchr/testify/require"
)

// sixShards is a small cluster: pg1 holds shards 0-1, pg2 2-3, pg3 4-5,
// each with a table items whose ids come from the shard's generator and
// five rows in it.
func sixShards(t *testing.T) (*Config, *Map) {
	t.Helper()
	cfg := initCluster(t, 6)
	m, err := ReadMap(ctx(t), pool(t, cfg.Catalog))
	require.NoError(t, err)
	for _, s := range m.Shards {
		exec(t, cfg, s.Host, fmt.Sprintf(`CREATE TABLE %[1]s.items (id bigint PRIMARY KEY DEFAULT %[1]s.next_id(), v text);
			INSERT INTO %[1]s.items (v) SELECT 'row ' || g FROM generate_series(1, 5) g`, s.Schema))
	}
	return cfg, m
}

func exec(t *testing.T, cfg *Config, host, sql string, args ...any) {
	t.Helper()
	_, err := hostPool(t, cfg, host).Exec(ctx(t), sql, args...)
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
	rep, err := Verify(ctx(t), cfg, VerifyOptions{Deep: true})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Equal(t, 6, rep.Shards)
	require.Equal(t, 3, rep.Hosts)
	require.Equal(t, 6*16, rep.ProbeIDs)
	require.Contains(t, rep.Checks, CheckDuplicateID)

	b, err := json.Marshal(rep)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true,"problems":[]}`, string(b))
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
		break_ func(t *testing.T, cfg *Config, m *Map) VerifyOptions
		want   want
	}{
		{"stray copy on a second host", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 1}))
			return VerifyOptions{}
		}, want{CheckPlacement, 1, "pg2"}},
		{"generator in another schema on a second host", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 0, Schema: "app_ids"}))
			return VerifyOptions{}
		}, want{CheckPlacement, 0, "pg3"}},
		{"shard schema missing from its host", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg3", "DROP SCHEMA shard_0005 CASCADE")
			return VerifyOptions{}
		}, want{CheckPlacement, 5, "pg3"}},
		{"shard beyond the shard count", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg1", "CREATE SCHEMA shard_0070")
			return VerifyOptions{}
		}, want{CheckPlacement, 70, "pg1"}},
		{"host does not record its shard", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", "DELETE FROM shardid.local_shards WHERE shard = 3")
			return VerifyOptions{}
		}, want{CheckHostRecord, 3, "pg2"}},
		{"host records a shard of another host", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", "INSERT INTO shardid.local_shards VALUES (4, 'shard_0004', 'active', 1)")
			return VerifyOptions{}
		}, want{CheckHostRecord, 4, "pg2"}},
		{"host belongs to another cluster", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg3", "UPDATE shardid.host_info SET cluster = 'other'")
			return VerifyOptions{}
		}, want{CheckHost, -1, "pg3"}},
		{"generator with the wrong shard id", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 3, Schema: "shard_0002"}))
			return VerifyOptions{}
		}, want{CheckGenerator, 2, "pg2"}},
		{"generator returning another shard id (marker intact)", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", render(t, shsql.Params{Shard: 3, Schema: "shard_0002"}))
			marker, err := shsql.Marker(shsql.Params{Shard: 2})
			require.NoError(t, err)
			exec(t, cfg, "pg2", fmt.Sprintf("COMMENT ON FUNCTION shard_0002.next_id() IS '%s'", marker))
			return VerifyOptions{}
		}, want{CheckGeneratorID, 2, "pg2"}},
		{"generator with another epoch (marker intact)", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 4, Epoch: shsql.DefaultEpoch - 3_600_000}))
			marker, err := shsql.Marker(shsql.Params{Shard: 4})
			require.NoError(t, err)
			exec(t, cfg, "pg3", fmt.Sprintf("COMMENT ON FUNCTION shard_0004.next_id() IS '%s'", marker))
			return VerifyOptions{}
		}, want{CheckGeneratorID, 4, "pg3"}},
		{"generator of the wrong variant", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 5, Variant: shsql.Instagram}))
			return VerifyOptions{}
		}, want{CheckGenerator, 5, "pg3"}},
		{"generator missing", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg1", "DROP FUNCTION shard_0001.next_id() CASCADE")
			return VerifyOptions{}
		}, want{CheckGenerator, 1, "pg1"}},
		{"generator without a marker", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg1", "COMMENT ON FUNCTION shard_0000.next_id() IS NULL")
			return VerifyOptions{}
		}, want{CheckGenerator, 0, "pg1"}},
		{"rewound sequence", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg1", "SELECT setval('shard_0000.next_id_counter', 1)")
			return VerifyOptions{}
		}, want{CheckCounter, 0, "pg1"}},
		{"sequence with CACHE 20", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", "ALTER SEQUENCE shard_0003.next_id_counter CACHE 20")
			return VerifyOptions{}
		}, want{CheckSequence, 3, "pg2"}},
		{"sequence with CYCLE", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", "ALTER SEQUENCE shard_0002.next_id_counter CYCLE")
			return VerifyOptions{}
		}, want{CheckSequence, 2, "pg2"}},
		{"sequence missing", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", "DROP SEQUENCE shard_0002.next_id_counter CASCADE")
			return VerifyOptions{}
		}, want{CheckSequence, 2, "pg2"}},
		{"leaked advisory lock", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			conn, err := pgx.Connect(ctx(t), hostDSN(cfg, "pg3"))
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close(context.Background()) })
			_, err = conn.Exec(ctx(t), "SELECT pg_advisory_lock_shared($1, 4)", int64(shsql.LockClass))
			require.NoError(t, err)
			return VerifyOptions{}
		}, want{CheckLock, 4, "pg3"}},
		{"manager clock off", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			return VerifyOptions{Now: func() time.Time { return time.Now().Add(-5 * time.Second) }}
		}, want{CheckClock, -1, "pg1"}},
		{"host clocks disagree", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			return VerifyOptions{MaxClockSkew: 2 * time.Second, hostClock: func(host string, now time.Time) time.Time {
				switch host {
				case "pg2":
					return now.Add(1500 * time.Millisecond)
				case "pg3":
					return now.Add(-1500 * time.Millisecond)
				}
				return now
			}}
		}, want{CheckClock, -1, "pg2"}},
		{"probe finds duplicate ids across shards", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			// Two generators stamping shard 5 with a frozen clock: both
			// return the same ids in the same order.
			frozen := "1400000000000::bigint"
			exec(t, cfg, "pg1", render(t, shsql.Params{Shard: 5, Schema: "shard_0001", Variant: shsql.Instagram, Clock: frozen}))
			exec(t, cfg, "pg3", render(t, shsql.Params{Shard: 5, Variant: shsql.Instagram, Clock: frozen}))
			return VerifyOptions{}
		}, want{CheckProbe, 1, "pg1"}},
		{"id copied into the wrong shard", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			var id int64
			require.NoError(t, hostPool(t, cfg, "pg1").QueryRow(ctx(t), "SELECT max(id) FROM shard_0000.items").Scan(&id))
			exec(t, cfg, "pg2", "INSERT INTO shard_0003.items (id, v) VALUES ($1, 'copied')", id)
			return VerifyOptions{Deep: true}
		}, want{CheckStoredShard, 3, "pg2"}},
		{"id copied into the wrong shard is a duplicate", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			var id int64
			require.NoError(t, hostPool(t, cfg, "pg1").QueryRow(ctx(t), "SELECT max(id) FROM shard_0000.items").Scan(&id))
			exec(t, cfg, "pg2", "INSERT INTO shard_0003.items (id, v) VALUES ($1, 'copied')", id)
			return VerifyOptions{Deep: true}
		}, want{CheckDuplicateID, 0, "pg1"}},
		{"id stored twice within one shard", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			exec(t, cfg, "pg2", `CREATE TABLE shard_0002.archive (id bigint DEFAULT shard_0002.next_id());
				INSERT INTO shard_0002.archive SELECT id FROM shard_0002.items LIMIT 1`)
			return VerifyOptions{Deep: true}
		}, want{CheckDuplicateID, 2, "pg2"}},
		{"catalog disagrees with the cluster file", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			cfg.Cluster = "renamed"
			return VerifyOptions{}
		}, want{CheckCatalog, -1, ""}},
		{"host unreachable", func(t *testing.T, cfg *Config, m *Map) VerifyOptions {
			cfg.Hosts[1].DSN = "postgres://postgres@127.0.0.1:1/nothing?connect_timeout=2"
			return VerifyOptions{}
		}, want{CheckHost, -1, "pg2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, m := sixShards(t)
			opts := tc.break_(t, cfg, m)
			rep, err := Verify(ctx(t), cfg, opts)
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

func hostDSN(cfg *Config, name string) string {
	h, _ := cfg.Host(name)
	return h.DSN
}
