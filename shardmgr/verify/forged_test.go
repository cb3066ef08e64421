package verify

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// insertOnlyRole connects to host as a new role that may only use the
// schema and insert into (and read) its items table, as an application
// role would.
func insertOnlyRole(t *testing.T, cfg *shardmgr.Config, host, schema string) *pgx.Conn {
	t.Helper()
	role := fmt.Sprintf("app_%d", time.Now().UnixNano())
	p := clustertest.HostPool(t, cfg, host)
	_, err := p.Exec(clustertest.Ctx(t), fmt.Sprintf(`CREATE ROLE %[1]s LOGIN; GRANT USAGE ON SCHEMA %[2]s TO %[1]s; GRANT INSERT, SELECT ON %[2]s.items TO %[1]s`, role, schema))
	require.NoError(t, err)
	t.Cleanup(func() { p.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	rc, err := pgx.ParseConfig(hostDSN(cfg, host))
	require.NoError(t, err)
	rc.User = role
	conn, err := pgx.ConnectConfig(clustertest.Ctx(t), rc)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// counterProblems are the report's counter problems for one shard.
func counterProblems(rep *Report, shard int) []Problem {
	var out []Problem
	for _, p := range rep.Failed(CheckCounter) {
		if p.Shard == shard {
			out = append(out, p)
		}
	}
	return out
}

// Issue 18, item 6: an INSERT-only role stores one forged id in its shard,
// with the largest time bits. verify reports it as an id no generator of
// the cluster can have made, with where it is, and prints no repair that
// moves the counter (it used to print next_id_advance(<that id>, force =>
// true), which exhausts the counter for good). Another id, a little ahead
// of a rewound counter, gets a repair without force; the repair run as
// printed works, and deleting the forged row clears the rest.
func TestVerifyReportsForgedIDNotACounterToAdvance(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	host := m.Shards[1].Host
	app := insertOnlyRole(t, cfg, host, "shard_0001")
	forged := int64(math.MaxInt64)&^(1<<23-1) | 1<<10 | 7 // time bits all ones, shard 1, seq 7
	_, err := app.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.items (id, v) VALUES ($1, 'forged')`, forged)
	require.NoError(t, err, "an INSERT-only role may write an explicit id")

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	ps := counterProblems(rep, 1)
	require.Len(t, ps, 1, "%v", rep.Problems)
	d := ps[0].Detail
	require.Contains(t, d, "1 id in shard_0001.items.id lies beyond the host's clock plus the 1h0m0s next_id_advance allows")
	require.Contains(t, d, fmt.Sprint(forged))
	require.Contains(t, d, "no generator of this cluster can have made them")
	require.Contains(t, d, "SELECT * FROM shard_0001.items WHERE id > ")
	for _, p := range rep.Problems {
		require.NotContains(t, p.Detail, "force", "verify never prints a forced advance: %s", p)
		require.NotContains(t, p.Detail, "-92233720", "no wrapped id: %s", p)
	}

	// The counter rewound, and an id half an hour ahead stored too: that one
	// is a counter to advance, within the margin, so without force.
	near := clustertest.FutureID(1, 30*time.Minute, 3)
	_, err = app.Exec(clustertest.Ctx(t), `INSERT INTO shard_0001.items (id, v) VALUES ($1, 'near')`, near)
	require.NoError(t, err)
	exec(t, cfg, host, "SELECT setval('shard_0001.next_id_counter', 1)")
	rep, err = Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	ps = counterProblems(rep, 1)
	require.Len(t, ps, 2, "%v", rep.Problems)
	repair := fmt.Sprintf(`SELECT "shard_0001"."next_id_advance"(%d)`, near)
	var repairs, forgedReports int
	for _, p := range ps {
		if strings.Contains(p.Detail, "counter is behind stored ids") {
			repairs++
			require.True(t, strings.HasSuffix(p.Detail, "repair: "+repair+")"), "%s", p)
		}
		if strings.Contains(p.Detail, "no generator of this cluster can have made them") {
			forgedReports++
		}
	}
	require.Equal(t, [2]int{1, 1}, [2]int{repairs, forgedReports}, "%v", ps)
	exec(t, cfg, host, repair)

	exec(t, cfg, host, `DELETE FROM shard_0001.items WHERE id = $1`, forged)
	rep, err = Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.Empty(t, counterProblems(rep, 1), "%v", rep.Problems)
	var id int64
	require.NoError(t, app.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0001.items (v) VALUES ('after') RETURNING id`).Scan(&id))
	require.Greater(t, id, near, "the generator works and is past every stored id")
}

// A counter already at its maximum (an advance of an older release, run
// to a forged id as verify printed it) is reported as exhausted, not as a
// counter behind stored ids whose next id is -9223372036854774784.
func TestVerifyReportsExhaustedCounter(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	host := m.Shards[2].Host
	exec(t, cfg, host, fmt.Sprintf("SELECT setval('shard_0002.next_id_counter', %d)", int64(1)<<50-1))
	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	ps := counterProblems(rep, 2)
	require.Len(t, ps, 1, "%v", rep.Problems)
	require.Contains(t, ps[0].Detail, `counter "shard_0002"."next_id_counter" is exhausted (at its maximum 1125899906842623)`)
	for _, p := range rep.Problems {
		require.NotContains(t, p.Detail, "-92233720", "%s", p)
		require.NotContains(t, p.Detail, "next_id_advance", "%s", p)
	}
}

// Issue 18, item 10: a role with CREATE on a shard schema (a migration
// role) creates the fence function before a move, takes over the counter,
// or hangs a trigger under the fence's name on a table. verify names each
// object and its owner; a cluster as init made it has no such problem
// (TestVerifyHealthy).
func TestVerifyChecksOwnersOfToolkitObjects(t *testing.T) {
	t.Parallel()
	cfg, m := sixShards(t)
	h0, h4 := m.Shards[0].Host, m.Shards[4].Host
	migrator := fmt.Sprintf("migrator_%d", time.Now().UnixNano())
	for _, h := range []string{h0, h4} {
		exec(t, cfg, h, fmt.Sprintf(`CREATE ROLE %s`, migrator))
		t.Cleanup(func() {
			clustertest.HostPool(t, cfg, h).Exec(context.Background(), fmt.Sprintf("DROP OWNED BY %[1]s; DROP ROLE %[1]s", migrator))
		})
	}
	exec(t, cfg, h0, fmt.Sprintf(`GRANT USAGE, CREATE ON SCHEMA shard_0000 TO %[1]s;
		SET ROLE %[1]s;
		CREATE FUNCTION shard_0000.shardid_fence() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
		RESET ROLE`, migrator))
	exec(t, cfg, h0, fmt.Sprintf(`ALTER SEQUENCE shard_0001.next_id_counter OWNER TO %s`, migrator))
	exec(t, cfg, h4, fmt.Sprintf(`CREATE FUNCTION public.let_through() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
		ALTER FUNCTION public.let_through() OWNER TO %s;
		CREATE TRIGGER shardid_fence BEFORE INSERT ON shard_0004.items FOR EACH STATEMENT EXECUTE FUNCTION public.let_through()`, migrator))

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	got := map[int]string{}
	for _, p := range rep.Failed(CheckOwner) {
		got[p.Shard] += p.Detail
	}
	require.Len(t, got, 3, "%v", rep.Problems)
	require.Contains(t, got[0], "function shard_0000.shardid_fence() is owned by role "+migrator+", not by postgres")
	require.Contains(t, got[1], "sequence shard_0001.next_id_counter is owned by role "+migrator)
	require.Contains(t, got[4], "function let_through() (run by trigger shardid_fence on shard_0004.items) is owned by role "+migrator)
}
