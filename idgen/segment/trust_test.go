package segment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/migrations"
)

// The owner of a source's database migrates it itself and puts a
// statement trigger on shardid.segments that makes it a superuser: the
// allocator (a superuser here) refuses to write to that source, with or
// without serve's migration step, and the planter stays what it was.
// (Failed before: the first segment's write ran the trigger.)
func TestPlantedSourceSchemaRefused(t *testing.T) {
	f := newFixture(t, 1)
	role, roleDSN := pgtest.Planter(t, f.dsns[0])
	require.NoError(t, migrations.Up(ctxT(t), roleDSN, migrations.Segment))
	_, err := pgtest.Pool(t, roleDSN).Exec(ctxT(t), pgtest.PlantSQL(role, "shardid.segments")+`
GRANT ALL ON shardid.segments TO PUBLIC`)
	require.NoError(t, err)

	// serve's migration step refuses the source.
	err = f.prepare(ctxT(t), 0)
	require.ErrorIs(t, err, segment.ErrUntrusted)
	require.ErrorContains(t, err, "schema shardid belongs to "+role)

	// An allocator without it does not write there either.
	a, err := segment.New(f.pools, map[string]segment.TagConfig{"order": {}}, segment.WithLogger(quietLogger()))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	_, err = a.Next(ctxT(t), "order")
	require.Error(t, err)
	require.ErrorIs(t, err, segment.ErrUntrusted)
	require.False(t, pgtest.Superuser(t, f.dsns[0], role), "the planter became a superuser")
	var rows int
	require.NoError(t, f.pools[0].QueryRow(ctxT(t), `SELECT count(*) FROM shardid.segments`).Scan(&rows))
	require.Zero(t, rows)

	// Relayout checks every source before it reads or writes any.
	_, err = segment.Relayout(ctxT(t), f.pools, []string{"order"})
	require.ErrorIs(t, err, segment.ErrUntrusted)
	require.False(t, pgtest.Superuser(t, f.dsns[0], role))
}
