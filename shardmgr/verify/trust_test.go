package verify

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// Issue 27, items 1 and 3, verify's part: after init, a non-superuser
// role that owns a host database (and another that owns the catalog's)
// gets a statement trigger of its own on shardid.local_shards (on the
// catalog, on shardid.hosts), schema shardid, and a shard schema (an
// adopted schema: ALTER SCHEMA ... OWNER TO it, by a superuser). verify
// reports each (CheckTrust), naming object and owner, and never tells
// the operator to ALTER anything OWNER TO the planter: it used to take
// the owner of schema shardid for the toolkit's role and advise exactly
// that (failed before: no trust problem, and "OWNER TO planter_...").
func TestVerifyReportsPlantedObjectsNotThePlanterAsToolkit(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	host, shard := m.Shards[0].Host, m.Shards[0]
	planter, _ := pgtest.Planter(t, hostDSN(cfg, host))
	catPlanter, _ := pgtest.Planter(t, cfg.Catalog)
	q, cq := pgx.Identifier{planter}.Sanitize(), pgx.Identifier{catPlanter}.Sanitize()

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Failed(CheckTrust), "an intact cluster whose databases other roles own: %v", rep.Problems)
	require.Contains(t, rep.Checks, CheckTrust)

	plant := `CREATE FUNCTION public.planted() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
		ALTER FUNCTION public.planted() OWNER TO %[1]s;
		CREATE TRIGGER planted AFTER INSERT ON shardid.%[2]s FOR EACH STATEMENT EXECUTE FUNCTION public.planted()`
	exec(t, cfg, host, fmt.Sprintf(plant, q, "local_shards"))
	exec(t, cfg, host, fmt.Sprintf(`ALTER SCHEMA %s OWNER TO %s; ALTER SCHEMA shardid OWNER TO %s`, shard.Schema, q, q))
	_, err = clustertest.Pool(t, cfg.Catalog).Exec(clustertest.Ctx(t), fmt.Sprintf(plant, cq, "hosts"))
	require.NoError(t, err)

	rep, err = Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	var details []string
	for _, p := range rep.Failed(CheckTrust) {
		require.Equal(t, FixUntrusted, p.Fix, "%s", p)
		details = append(details, p.Host+": "+p.Detail)
	}
	all := strings.Join(details, "\n")
	require.Contains(t, all, host+": trigger planted on shardid.local_shards belongs to "+planter)
	require.Contains(t, all, host+": schema shardid belongs to "+planter)
	require.Contains(t, all, host+": schema "+shard.Schema+" belongs to "+planter)
	require.Contains(t, all, ": trigger planted on shardid.hosts belongs to "+catPlanter)
	for _, p := range append(rep.Problems, rep.Notes...) {
		require.NotContains(t, p.Detail, "OWNER TO "+planter, "verify never advises making the planter the owner: %s", p)
		require.NotContains(t, p.Detail, "OWNER TO "+catPlanter, "verify never advises making the planter the owner: %s", p)
	}
}
