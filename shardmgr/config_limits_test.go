package shardmgr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cluster file is read with a limit: /dev/zero, or a file past
// MaxConfigSize, is one short error, not an out-of-memory death.
func TestLoadConfigRefusesHugeInput(t *testing.T) {
	_, err := LoadConfig("/dev/zero")
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorIs(t, err, ErrFileTooLarge)
	require.ErrorContains(t, err, "more than 1 MiB")

	big := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("cluster: x\n# "+strings.Repeat("x", MaxConfigSize)+"\n"), 0o600))
	_, err = LoadConfig(big)
	require.ErrorIs(t, err, ErrFileTooLarge)
	require.Less(t, len(err.Error()), 300)

	// Up to the limit is read.
	ok := filepath.Join(t.TempDir(), "ok.yaml")
	require.NoError(t, os.WriteFile(ok, []byte("cluster: x\n# "+strings.Repeat("x", MaxConfigSize-20)+"\n"), 0o600))
	cfg, err := LoadConfig(ok)
	require.NoError(t, err)
	require.Equal(t, "x", cfg.Cluster)
}

// Input echoed in an error is cut: a 50 MB cluster name does not come
// back whole.
func TestErrorsDoNotEchoHugeInput(t *testing.T) {
	name := strings.Repeat("n", 50<<20)
	cfg := &Config{Path: "x.yaml", Cluster: name, Shards: 1, Catalog: "postgres://h/db",
		Hosts: []Host{{Name: "pg1" + name, DSN: "postgres://h/app"}}}
	err := cfg.ValidateCluster()
	require.ErrorIs(t, err, ErrConfig)
	require.Less(t, len(err.Error()), 1000, "the message repeats at most a prefix of the input")
	require.Contains(t, err.Error(), "(52428800 bytes)")

	data := []byte("cluster: c\n" + strings.Repeat("k", 1<<20-100) + ": 1\n")
	_, err = ParseConfig(data, "x.yaml", func(string) (string, bool) { return "", false })
	require.ErrorIs(t, err, ErrConfig)
	require.Less(t, len(err.Error()), 1000)
}

// The cluster file's epoch_ms follows the rule every epoch follows
// (shsql.CheckEpoch, which sql function --epoch uses too).
func TestValidateClusterEpochRule(t *testing.T) {
	for epoch, want := range map[int64]string{
		99999999999999:      "epoch_ms: 99999999999999 is in the future",
		9223372036854775807: "epoch_ms: 9223372036854775807 is in the future",
		-1:                  "epoch_ms: -1 is negative",
	} {
		cfg := &Config{Path: "x.yaml", Cluster: "c", Shards: 1, EpochMS: epoch, Catalog: "postgres://h/db",
			Hosts: []Host{{Name: "pg1", DSN: "postgres://h/app"}}}
		err := cfg.ValidateCluster()
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorContains(t, err, want)
	}
}
