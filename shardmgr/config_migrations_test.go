package shardmgr

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// migrations: in the cluster file is resolved against the file's own
// directory, not the working directory.
func TestConfigMigrationsDir(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "m")
	for _, tc := range []struct{ path, migrations, want string }{
		{"/etc/shardid/shardid.yaml", "./migrations", "/etc/shardid/migrations"},
		{"/etc/shardid/shardid.yaml", "../app/migrations", "/etc/app/migrations"},
		{"conf/shardid.yaml", "migrations", filepath.Join("conf", "migrations")},
		{"shardid.yaml", "./migrations", "migrations"},
		{"/etc/shardid/shardid.yaml", abs, abs},
		{"/etc/shardid/shardid.yaml", "", ""},
	} {
		data := []byte("cluster: c\nshards: 4\ncatalog: postgres://h/c\nhosts:\n  - name: pg1\n    dsn: postgres://h/a\n")
		if tc.migrations != "" {
			data = append(data, []byte("migrations: "+tc.migrations+"\n")...)
		}
		cfg, err := ParseConfig(data, tc.path, nil)
		require.NoError(t, err)
		require.Equal(t, tc.migrations, cfg.Migrations)
		require.Equal(t, tc.want, cfg.MigrationsDir(), "%+v", tc)
	}
}
