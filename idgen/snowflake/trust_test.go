package snowflake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

// The owner of the lease database migrates it itself and puts a
// statement trigger on shardid.snowflake_leases that makes it a
// superuser: the lease migrations and Start (a superuser here) refuse it,
// and no lease is written. (Failed before: Start's lease ran the trigger.)
func TestPlantedLeaseSchemaRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	role, roleDSN := pgtest.Planter(t, dsn)
	require.NoError(t, migrations.Up(ctx, roleDSN, migrations.Snowflake))
	_, err := pgtest.Pool(t, roleDSN).Exec(ctx, pgtest.PlantSQL(role, "shardid.snowflake_leases", "shardid.snowflake_lease_marks")+`
GRANT ALL ON ALL TABLES IN SCHEMA shardid TO PUBLIC; GRANT ALL ON ALL SEQUENCES IN SCHEMA shardid TO PUBLIC`)
	require.NoError(t, err)

	err = migrations.Up(ctx, dsn, migrations.Snowflake)
	require.ErrorIs(t, err, snowflake.ErrUntrusted)
	require.ErrorContains(t, err, "schema shardid belongs to "+role)

	pool := pgtest.Pool(t, dsn)
	_, err = snowflake.Start(ctx, pool, snowflake.Settings{Datacenter: 1})
	require.ErrorIs(t, err, snowflake.ErrUntrusted)
	require.ErrorContains(t, err, "schema shardid belongs to "+role)
	require.False(t, pgtest.Superuser(t, dsn, role), "the planter became a superuser")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM shardid.snowflake_leases) + (SELECT count(*) FROM shardid.snowflake_lease_marks)`).Scan(&rows))
	require.Zero(t, rows)
}
