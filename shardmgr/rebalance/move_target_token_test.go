package rebalance

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// A role that may create schemas in the target's database makes the
// shard's schema there in advance, with the comment the move would write
// (its words are predictable: shard, move id, source): the move refuses
// it, naming it, and builds nothing in it; the planter's schema is as it
// made it. Failed before: the move took the planted schema for its own and
// installed the generator in it, which its owner could then replace.
func TestMoveRefusesAPlantedTargetSchema(t *testing.T) {
	t.Parallel()
	cfg := moveCluster(t, 3)
	m := clustertest.ClusterMap(t, cfg)
	const shard = 1
	from, schema := m.Shards[shard].Host, m.Shards[shard].Schema
	planter := clustertest.Role(t, cfg, "planter")
	admin := clustertest.HostPool(t, cfg, "pg4")
	var db string
	require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT current_database()`).Scan(&db))
	_, err := admin.Exec(clustertest.Ctx(t), `GRANT CREATE ON DATABASE `+pgx.Identifier{db}.Sanitize()+` TO `+pgx.Identifier{planter}.Sanitize())
	require.NoError(t, err)
	h, _ := cfg.Host("pg4")
	as := clustertest.Pool(t, clustertest.AsRole(t, h.DSN, planter))
	var next int64
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t),
		`SELECT coalesce(max(id), 0) + 1 FROM shardid.moves`).Scan(&next))
	predicted := fmt.Sprintf("shardid: incoming copy of shard %d, move %d from %s", shard, next, from)
	q := pgx.Identifier{schema}.Sanitize()
	_, err = as.Exec(clustertest.Ctx(t), `CREATE SCHEMA `+q+`; COMMENT ON SCHEMA `+q+` IS `+pg.QuoteLiteral(predicted))
	require.NoError(t, err)

	res, err := MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", MoveOptions{Migrations: sampleSet(t)})
	require.ErrorIs(t, err, ErrTargetOccupied)
	require.ErrorContains(t, err, "a schema "+schema+" that this move did not make")
	require.Equal(t, next, res.ID)
	var objects int
	require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace`, schema).Scan(&objects))
	require.Zero(t, objects, "the move built in the planted schema")
	var owner string
	require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = $1`, schema).Scan(&owner))
	require.Equal(t, planter, owner)
	require.Equal(t, from, clustertest.ClusterMap(t, cfg).Shards[shard].Host)

	// The move's own schema (its token's mark) is its own on a resume.
	_, err = admin.Exec(clustertest.Ctx(t), `DROP SCHEMA `+q)
	require.NoError(t, err)
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.stopAfter = PhaseSchema
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.ErrorIs(t, err, errStopped)
	var comment string
	require.NoError(t, admin.QueryRow(clustertest.Ctx(t), `SELECT obj_description($1::regnamespace, 'pg_namespace')`, schema).Scan(&comment))
	require.Regexp(t, `^`+predicted+`, mark [0-9a-f]{32}$`, comment)
	var token string
	require.NoError(t, clustertest.Pool(t, cfg.Catalog).QueryRow(clustertest.Ctx(t), `SELECT target_token FROM shardid.moves WHERE id = $1`, next).Scan(&token))
	require.NotContains(t, comment, token)
	opts.stopAfter = ""
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), shard, "pg4", opts)
	require.NoError(t, err)
}
