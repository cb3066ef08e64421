package fence

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// Raise, the cut-over's fence on an online move's source, takes no
// table lock: a VACUUM working on the table (here its lock, held by a
// transaction) does not hold it up, while a writer in flight does, and
// every write after it is refused.
func TestRaiseFenceWaitsForWritersNotVacuum(t *testing.T) {
	t.Parallel()
	db := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	c := ctx(t)
	_, err := db.Exec(c, `CREATE SCHEMA s; CREATE TABLE s.t (id int PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error { return Install(c, tx, "s", false) }))
	_, err = db.Exec(c, `INSERT INTO s.t VALUES (1)`)
	require.NoError(t, err, "an open fence lets writes through")

	hold := func(sql string) pgx.Tx {
		tx, err := db.Begin(c)
		require.NoError(t, err)
		_, err = tx.Exec(c, sql)
		require.NoError(t, err)
		return tx
	}
	vacuum := hold(`LOCK TABLE s.t IN SHARE UPDATE EXCLUSIVE MODE`) // what (auto)vacuum holds
	defer vacuum.Rollback(c)
	writer := hold(`INSERT INTO s.t VALUES (2)`)

	done := make(chan error, 1)
	go func() { done <- Raise(c, db, "s", 100*time.Millisecond) }()
	// The fence is up for new writers at once (a statement trigger fires
	// for a statement that writes no row)...
	require.Eventually(t, func() bool {
		_, err := db.Exec(c, `INSERT INTO s.t SELECT 3 WHERE false`)
		return IsFenceError(err)
	}, 2*time.Minute, 10*time.Millisecond)
	_, err = db.Exec(c, `INSERT INTO s.t VALUES (3)`)
	require.True(t, IsFenceError(err), "%v", err)
	// ...but Raise returns only once the writer in flight has ended.
	select {
	case err := <-done:
		t.Fatalf("Raise returned with a writer in flight: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, writer.Commit(c))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("Raise still waiting after the writer ended")
	}
	rows, err := db.Query(c, `SELECT id FROM s.t ORDER BY id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, ids)
	_, err = db.Exec(c, `UPDATE s.t SET id = id`)
	require.True(t, IsFenceError(err), "%v", err)
}

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// The fence covers a partitioned table whole: a write straight into a
// partition, at any level of the tree, is refused as one through the
// parent is; Remove takes it off every table.
func TestFenceCoversPartitions(t *testing.T) {
	t.Parallel()
	db := pgtest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	c := ctx(t)
	_, err := db.Exec(c, `CREATE SCHEMA s;
		CREATE TABLE s.m (id int, kind int, at int, PRIMARY KEY (id, kind, at)) PARTITION BY LIST (kind);
		CREATE TABLE s.m_k0 PARTITION OF s.m FOR VALUES IN (0) PARTITION BY RANGE (at);
		CREATE TABLE s.m_k0_lo PARTITION OF s.m_k0 FOR VALUES FROM (MINVALUE) TO (100);
		CREATE TABLE s.m_k0_hi PARTITION OF s.m_k0 FOR VALUES FROM (100) TO (MAXVALUE);
		CREATE TABLE s.m_rest PARTITION OF s.m DEFAULT;
		CREATE TABLE s.a_plain (id int PRIMARY KEY)`)
	require.NoError(t, err)
	tables, err := ShardTables(c, db, "s")
	require.NoError(t, err)
	require.Equal(t, []string{"a_plain", "m", "m_k0", "m_rest", "m_k0_hi", "m_k0_lo"}, tables, "parents before their partitions")

	require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error { return Install(c, tx, "s", true) }))
	ok, err := Installed(c, db, "s")
	require.NoError(t, err)
	require.True(t, ok)
	for _, sql := range []string{
		`INSERT INTO s.m VALUES (1, 0, 1)`,
		`INSERT INTO s.m_k0 VALUES (2, 0, 200)`,
		`INSERT INTO s.m_k0_lo VALUES (3, 0, 3)`,
		`INSERT INTO s.m_k0_hi VALUES (4, 0, 400)`,
		`INSERT INTO s.m_rest VALUES (5, 7, 5)`,
		`UPDATE s.m_k0_hi SET at = at`,
		`DELETE FROM s.m_rest`,
		`TRUNCATE s.m_k0_lo`,
		`INSERT INTO s.a_plain VALUES (1)`,
	} {
		_, err := db.Exec(c, sql)
		require.True(t, IsFenceError(err), "%s: %v", sql, err)
	}
	// A new partition of a fenced copy is fenced too.
	_, err = db.Exec(c, `CREATE TABLE s.m_k1 PARTITION OF s.m FOR VALUES IN (1)`)
	require.NoError(t, err)
	ok, err = Installed(c, db, "s")
	require.NoError(t, err)
	require.False(t, ok, "the new partition has no fence yet")
	require.NoError(t, NewTables(c, db, "s"))
	_, err = db.Exec(c, `INSERT INTO s.m_k1 VALUES (6, 1, 6)`)
	require.True(t, IsFenceError(err), "%v", err)

	require.NoError(t, pgx.BeginFunc(c, db, func(tx pgx.Tx) error { return Remove(c, tx, "s") }))
	_, err = db.Exec(c, `INSERT INTO s.m_k0_hi VALUES (4, 0, 400); INSERT INTO s.m_k1 VALUES (6, 1, 6); INSERT INTO s.m VALUES (1, 0, 1)`)
	require.NoError(t, err)
	var left int
	require.NoError(t, db.QueryRow(c, `SELECT count(*) FROM pg_trigger WHERE tgname = $1`, fenceTrigger).Scan(&left))
	require.Zero(t, left)
}
