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
