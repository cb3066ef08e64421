package serveconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/shardmgr"
)

func clusterFile(name string) string {
	return filepath.Join("..", "..", "..", "testdata", "clusters", name)
}

func TestSegmentsOnlyFileLoads(t *testing.T) {
	s, err := Load(clusterFile("segments-only.yaml"), os.LookupEnv)
	require.NoError(t, err)
	require.NotNil(t, s.Segments)
	require.Nil(t, s.Snowflake)
	require.Equal(t, []string{"postgres://postgres@127.0.0.1:5433/segments"}, s.Segments.Sources)
	require.Contains(t, s.Segments.Tags, "orders")
}

func TestClusterOnlyFileHasNoSections(t *testing.T) {
	s, err := Load(clusterFile("three-hosts.yaml"), os.LookupEnv)
	require.NoError(t, err)
	require.Nil(t, s.Segments)
	require.Nil(t, s.Snowflake)
}

// TestSectionsExpandEnvironment: ${VAR} in the sources and the lease DSN
// is expanded; one that is not set is an error naming it; a bare $ stays.
func TestSectionsExpandEnvironment(t *testing.T) {
	env := map[string]string{"PGPASS": "s3cret", "PGHOST": "db1", "PW": "secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	data := []byte(`segments:
  sources:
    - postgres://app:${PGPASS}@${PGHOST}:5432/seg
    - postgres://app:pa$$w@h/seg
  tags:
    orders: {}
snowflake:
  leases: postgres://u:${PW}@h/leases
  datacenter: 3
`)
	s, err := Parse(data, "f.yaml", lookup)
	require.NoError(t, err)
	require.Equal(t, []string{"postgres://app:s3cret@db1:5432/seg", "postgres://app:pa$$w@h/seg"}, s.Segments.Sources)
	require.Equal(t, "postgres://u:secret@h/leases", s.Snowflake.Leases)
	require.EqualValues(t, 3, s.Snowflake.Datacenter)

	delete(env, "PGPASS")
	_, err = Parse(data, "f.yaml", lookup)
	require.ErrorIs(t, err, segment.ErrConfig)
	require.ErrorContains(t, err, "PGPASS")
	env["PGPASS"] = "x"
	delete(env, "PW")
	_, err = Parse(data, "f.yaml", lookup)
	require.ErrorIs(t, err, snowflake.ErrInvalidSettings)
	require.ErrorContains(t, err, "PW")
}

// TestUnknownKeys: a typo in a section, or at the top level, is an error
// naming the key; the cluster part is still checked when serve reads it.
func TestUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ body, want string }{
		"in segments":  {"segments:\n  sources: [postgres://h/seg]\n  tags:\n    order: {min_stp: 5}\n", "min_stp"},
		"in snowflake": {"snowflake:\n  leases: postgres://h/x\n  worker: 3\n", "worker"},
		"top level":    {"segmnets:\n  sources: [postgres://h/seg]\n", "segmnets"},
	} {
		p := filepath.Join(dir, "f.yaml")
		require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o600))
		_, err := Load(p, os.LookupEnv)
		require.ErrorIs(t, err, shardmgr.ErrConfig, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	_, err := Load(filepath.Join(dir, "absent.yaml"), os.LookupEnv)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "absent.yaml not found")
}
