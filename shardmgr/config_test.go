package shardmgr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func clusterFile(name string) string { return filepath.Join("..", "testdata", "clusters", name) }

func TestLoadConfigIssueShape(t *testing.T) {
	cfg, err := LoadConfig(clusterFile("three-hosts.yaml"))
	require.NoError(t, err)
	require.NoError(t, cfg.ValidateCluster())
	require.Equal(t, "demo", cfg.Cluster)
	require.Equal(t, 64, cfg.Shards)
	require.EqualValues(t, 1314220021721, cfg.EpochMS)
	require.Equal(t, "postgres://postgres@127.0.0.1:5433/shardid_catalog", cfg.Catalog)
	require.Len(t, cfg.Hosts, 3)
	require.Equal(t, Host{Name: "pg2", DSN: "postgres://postgres@127.0.0.1:5434/app", rawDSN: "postgres://postgres@127.0.0.1:5434/app"}, cfg.Hosts[1])
}

func TestConfigExpandsEnvironment(t *testing.T) {
	data, err := os.ReadFile(clusterFile("env-dsn.yaml"))
	require.NoError(t, err)
	lookup := func(name string) (string, bool) {
		if name == "SHARDID_TEST_PASSWORD" {
			return "s3cret", true
		}
		return "", false
	}
	cfg, err := ParseConfig(data, "env-dsn.yaml", lookup)
	require.NoError(t, err)
	require.NoError(t, cfg.ValidateCluster())
	require.Equal(t, "postgres://shardid:s3cret@catalog.internal:5432/shardid_catalog", cfg.Catalog)
	require.Equal(t, "postgres://app:s3cret@db2.internal:5432/app", cfg.Hosts[1].DSN)
	require.Equal(t, "postgres://app:${SHARDID_TEST_PASSWORD}@db2.internal:5432/app", cfg.Hosts[1].RawDSN(), "the catalog records the DSN as written")
	require.True(t, cfg.Hosts[1].Drain)
}

func TestSegmentsOnlyFileLoads(t *testing.T) {
	cfg, err := LoadConfig(clusterFile("segments-only.yaml"))
	require.NoError(t, err, "serve's sections are accepted (internal/app/serveconfig reads them)")
	require.ErrorIs(t, cfg.ValidateCluster(), ErrConfig, "but it describes no cluster")
}

// TestBadClusterFiles: each bad file gives one error that says what is
// wrong and where.
func TestBadClusterFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"unknown-key.yaml", []string{"unknown-key.yaml", "line 7", `unknown key "port" (known keys: app_dsn, drain, dsn, name)`}},
		{"unknown-scheme.yaml", []string{`catalog: cannot parse the DSN: unknown URL scheme "postgress"`, `hosts[0].dsn: cannot parse the DSN: unknown URL scheme "postgress"`}},
		{"unknown-top-key.yaml", []string{"unknown-top-key.yaml", `line 3: unknown key "shard" (known keys: catalog, cluster, epoch_ms, generator, hosts, migrations, segments, shards, snowflake)`}},
		{"duplicate-host.yaml", []string{`hosts[1].name: duplicate host name "pg1" (also hosts[0])`}},
		{"duplicate-dsn.yaml", []string{"hosts[1].dsn: duplicate DSN, same database as hosts[0] (127.0.0.1:5433/app)"}},
		{"too-many-shards.yaml", []string{"shards: 10000 is impossible (1..8192)"}},
		{"no-shards.yaml", []string{"shards: -3 is impossible (1..8192)"}},
		{"no-hosts.yaml", []string{"hosts: at least one host is needed"}},
		{"not-yaml.yaml", []string{"not-yaml.yaml", "line"}},
		{"missing-env.yaml", []string{"environment variable SHARDID_TEST_UNSET_VARIABLE not set"}},
		{"does-not-exist.yaml", []string{"does-not-exist.yaml not found"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cfg, err := LoadConfig(clusterFile(tc.file))
			if err == nil {
				err = cfg.ValidateCluster()
			}
			require.Error(t, err)
			require.ErrorIs(t, err, ErrConfig)
			msg := err.Error()
			require.NotContains(t, msg, "\n", "one line")
			require.NotContains(t, msg, "struct {", "no Go type")
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
			t.Log(msg)
		})
	}
}

func TestValidateClusterReportsEveryProblem(t *testing.T) {
	cfg := &Config{Path: "x.yaml", Cluster: "bad name!", Shards: 0, EpochMS: -1, Hosts: []Host{{Name: "", DSN: ""}}}
	err := cfg.ValidateCluster()
	require.ErrorIs(t, err, ErrConfig)
	for _, w := range []string{"cluster:", "shards: missing", "epoch_ms: -1 is negative", "catalog: missing", "hosts[0].name: missing", "hosts[0].dsn: missing"} {
		require.Contains(t, err.Error(), w)
	}
	require.Equal(t, 1, strings.Count(err.Error(), "invalid cluster file"))
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"three-hosts.yaml", "unknown-key.yaml", "duplicate-dsn.yaml", "segments-only.yaml"} {
		data, err := os.ReadFile(clusterFile(name))
		require.NoError(f, err)
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data, "fuzz.yaml", func(string) (string, bool) { return "x", true })
		if err != nil {
			require.ErrorIs(t, err, ErrConfig)
			return
		}
		if err := cfg.ValidateCluster(); err != nil {
			require.ErrorIs(t, err, ErrConfig)
		}
	})
}

// app_dsn: the applications' DSN of a host, ${VAR}s expanded as in dsn;
// one that does not parse is a validation error naming its key.
func TestConfigAppDSN(t *testing.T) {
	data := []byte(`cluster: demo
shards: 4
catalog: postgres://postgres@127.0.0.1:5433/shardid_catalog
hosts:
  - name: pg1
    dsn: postgres://postgres@127.0.0.1:5433/app
    app_dsn: postgres://app:${PW}@127.0.0.1:6432/app
`)
	lookup := func(name string) (string, bool) { return "s3cret", name == "PW" }
	cfg, err := ParseConfig(data, "app.yaml", lookup)
	require.NoError(t, err)
	require.NoError(t, cfg.ValidateCluster())
	require.Equal(t, "postgres://app:s3cret@127.0.0.1:6432/app", cfg.Hosts[0].AppDSN)
	require.Equal(t, "postgres://postgres@127.0.0.1:5433/app", cfg.Hosts[0].DSN, "dsn stays the operators'")

	cfg.Hosts[0].AppDSN = "postgres://app@127.0.0.1:notaport/app"
	err = cfg.ValidateCluster()
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "hosts[0].app_dsn: cannot parse DSN")
}
