package migrate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// The tests of this package are external (package migrate_test): they
// need clusters installed by package install, which imports migrate.

func TestMain(m *testing.M) { pgtest.Main(m) }

// migrationErrors are the *migrate.MigrationError failures of a run's
// *shardmgr.ShardErrors, in order.
func migrationErrors(t testing.TB, serr *shardmgr.ShardErrors) []*migrate.MigrationError {
	t.Helper()
	out := make([]*migrate.MigrationError, len(serr.Errs))
	for i, err := range serr.Errs {
		require.ErrorAs(t, err, &out[i])
	}
	return out
}
