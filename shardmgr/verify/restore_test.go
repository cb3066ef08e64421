package verify

import (
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
)

// A table-only restore (pg_dump -t, pg_restore --data-only) into a shard
// whose generator was installed afresh leaves the counter below the
// restored ids. verify reports it and names the statement that repairs
// it; running that statement clears the problem.
func TestTableOnlyRestoreVerifyNamesTheRepair(t *testing.T) {
	t.Parallel()
	pgDump, pgRestore := pgtest.Tool(t, "pg_dump"), pgtest.Tool(t, "pg_restore")
	cfg := installtest.Cluster(t, 3)
	pg1 := clustertest.HostPool(t, cfg, "pg1")
	const table = `CREATE TABLE shard_0000.likes (id bigint PRIMARY KEY DEFAULT shard_0000.next_id(), v int)`
	exec(t, cfg, "pg1", table)
	exec(t, cfg, "pg1", `INSERT INTO shard_0000.likes (v) SELECT g FROM generate_series(1, 500) g`)
	var maxID int64
	require.NoError(t, pg1.QueryRow(clustertest.Ctx(t), `SELECT max(id) FROM shard_0000.likes`).Scan(&maxID))

	dump := filepath.Join(t.TempDir(), "likes.dump")
	dsn := hostDSN(cfg, "pg1")
	out, err := osexec.Command(pgDump, "-Fc", "-t", "shard_0000.likes", "-f", dump, "-d", dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)

	// The shard is rebuilt: a fresh generator (init), the table (its
	// migrations), then the rows alone.
	exec(t, cfg, "pg1", `DROP SCHEMA shard_0000 CASCADE`)
	_, err = install.Init(clustertest.Ctx(t), clustertest.Handle(t, cfg), install.InitOptions{})
	require.NoError(t, err)
	exec(t, cfg, "pg1", table)
	out, err = osexec.Command(pgRestore, "--data-only", "-t", "likes", "-d", dsn, dump).CombinedOutput()
	require.NoError(t, err, "%s", out)

	rep, err := Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	repair := fmt.Sprintf(`SELECT "shard_0000"."next_id_advance"(%d)`, maxID)
	var found bool
	for _, p := range rep.Problems {
		if p.Check == CheckCounter && p.Shard == 0 {
			found = true
			require.Contains(t, p.Detail, "counter is behind stored ids")
			require.True(t, strings.Contains(p.Detail, repair), "%s does not name the repair %s", p, repair)
		}
	}
	require.True(t, found, "problems: %v", rep.Problems)

	exec(t, cfg, "pg1", repair)
	rep, err = Verify(clustertest.Ctx(t), clustertest.Handle(t, cfg), Options{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	var id int64
	require.NoError(t, pg1.QueryRow(clustertest.Ctx(t), `INSERT INTO shard_0000.likes (v) VALUES (0) RETURNING id`).Scan(&id))
	require.Greater(t, id, maxID)
}
