package migrate_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// An application role given ALL on a shard's tables (TRIGGER included)
// and a schema of its own puts a statement trigger on
// shard_0000.schema_version that would make it a superuser: migrate up
// refuses shard 0 before running anything there, naming the trigger and
// its owner, and migrates the others. (Failed before: the version write
// ran the trigger as the migrating superuser.)
func TestMigrateUpRefusesForeignTriggerOnVersionTable(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 2)
	set := setOf(t, map[string]string{"001_likes.sql": createLikes})
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), set, migrate.Options{})
	require.NoError(t, err)
	m := clustertest.ClusterMap(t, cfg)
	host := shardPool(t, cfg, m, 0)
	app := clustertest.Role(t, cfg, "app")
	qa := pgx.Identifier{app}.Sanitize()
	_, err = host.Exec(clustertest.Ctx(t), `GRANT USAGE ON SCHEMA shard_0000 TO `+qa+`;
		GRANT ALL ON ALL TABLES IN SCHEMA shard_0000 TO `+qa+`;
		CREATE SCHEMA app_code AUTHORIZATION `+qa)
	require.NoError(t, err)
	h, _ := cfg.Host(m.Shards[0].Host)
	_, err = clustertest.Pool(t, clustertest.AsRole(t, h.DSN, app)).Exec(clustertest.Ctx(t), fmt.Sprintf(`
CREATE FUNCTION app_code.promote() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN ALTER ROLE %s SUPERUSER; RETURN NULL; END$$;
CREATE TRIGGER promote AFTER UPDATE ON shard_0000.schema_version FOR EACH STATEMENT EXECUTE FUNCTION app_code.promote();`, qa))
	require.NoError(t, err)

	more := setOf(t, map[string]string{"001_likes.sql": createLikes, "002_tags.sql": `CREATE TABLE {{.schema}}.tags (id bigint);`})
	_, err = migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), more, migrate.Options{})
	var se *shardmgr.ShardErrors
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Errs, 1)
	require.ErrorIs(t, se.Errs[0], shardmgr.ErrUntrusted)
	require.ErrorContains(t, se.Errs[0], "trigger promote on shard_0000.schema_version belongs to "+app)
	require.ErrorContains(t, se.Errs[0], "DROP TRIGGER promote ON shard_0000.schema_version")

	var super bool
	require.NoError(t, host.QueryRow(clustertest.Ctx(t), `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, app).Scan(&super))
	require.False(t, super, "the application role became a superuser")
	require.False(t, clustertest.TableExists(t, host, "shard_0000.tags"), "nothing ran on shard 0")
	var v int
	require.NoError(t, host.QueryRow(clustertest.Ctx(t), `SELECT version FROM shard_0000.schema_version`).Scan(&v))
	require.Equal(t, 1, v)
	require.True(t, clustertest.TableExists(t, shardPool(t, cfg, m, 1), "shard_0001.tags"), "the other shard migrated")
}
