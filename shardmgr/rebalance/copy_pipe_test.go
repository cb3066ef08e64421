package rebalance

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
)

// countingConn counts the writes to a connection's socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// pipeConns connects to a database of its own on a shared server twice:
// a source with a table of rows 1..rows (src_rows) and a target with an
// empty one (dst_rows) whose CHECK refuses values above refuseAbove (0:
// none). The target's socket writes are counted in writes.
func pipeConns(t *testing.T, rows, refuseAbove int) (dsn string, src, dst *pgconn.PgConn, writes *atomic.Int64) {
	t.Helper()
	ctx := clustertest.Ctx(t)
	dsn = pgtest.NewDB(t, pgtest.Servers(t, 1)[0])
	check := ""
	if refuseAbove > 0 {
		check = " CHECK (v <= " + strconv.Itoa(refuseAbove) + ")"
	}
	setup := pgtest.Pool(t, dsn)
	_, err := setup.Exec(ctx, `CREATE TABLE src_rows (v bigint NOT NULL, pad text NOT NULL);
		INSERT INTO src_rows SELECT g, 'row ' || g FROM generate_series(1, `+strconv.Itoa(rows)+`) g;
		CREATE TABLE dst_rows (v bigint NOT NULL`+check+`, pad text NOT NULL)`)
	require.NoError(t, err)
	connect := func(count *atomic.Int64) *pgconn.PgConn {
		cfg, err := pgconn.ParseConfig(dsn)
		require.NoError(t, err)
		if count != nil {
			dial := cfg.DialFunc
			cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{Conn: c, writes: count}, nil
			}
		}
		conn, err := pgconn.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	writes = new(atomic.Int64)
	return dsn, connect(nil), connect(writes), writes
}

const (
	pipeOut = `COPY (SELECT v, pad FROM src_rows ORDER BY v) TO STDOUT (FORMAT binary)`
	pipeIn  = `COPY dst_rows (v, pad) FROM STDIN (FORMAT binary)`
)

// A table's rows reach the target in a few large CopyData messages, not
// one socket write per row (issue 29: pgconn's CopyTo writes each row on
// its own, and CopyFrom sent each as a message: the move ran 4-5x slower
// than psql's pipe). Failed before: 100,000 rows took about 100,000
// writes.
func TestPipeCopyWritesInBlocks(t *testing.T) {
	const rows = 100_000
	_, src, dst, writes := pipeConns(t, rows, 0)
	before := writes.Load()
	counter := &copyCounter{}
	n, err := pipeCopy(clustertest.Ctx(t), src, dst, pipeOut, pipeIn, counter)
	require.NoError(t, err)
	require.EqualValues(t, rows, n)
	require.EqualValues(t, rows, counter.rows.Load(), "the rows counted as they were sent")
	// About 2.6 MB of binary COPY: 40 blocks of 64 KiB, and the
	// statement's own messages.
	require.Less(t, writes.Load()-before, int64(200), "socket writes to the target for %d rows", rows)
	res := dst.ExecParams(clustertest.Ctx(t), `SELECT count(*), sum(v) FROM dst_rows`, nil, nil, nil, nil).Read()
	require.NoError(t, res.Err)
	require.Equal(t, []string{strconv.Itoa(rows), strconv.Itoa(rows * (rows + 1) / 2)}, []string{string(res.Rows[0][0]), string(res.Rows[0][1])})
}

// A copy whose target fails part way (a CHECK refuses a row past the
// first blocks) returns the target's error, stores nothing, and leaves no
// goroutine of the pipe behind; nor does one whose source fails part way
// (a division by zero in its query), which returns the source's error
// and stores nothing.
func TestPipeCopyEndsBothSidesOnFailure(t *testing.T) {
	ctx := clustertest.Ctx(t)
	for _, tc := range []struct {
		name     string
		refuse   int
		out      string
		sqlstate string
	}{
		{"target", 150_000, pipeOut, pgerrcode.CheckViolation},
		{"source", 0, `COPY (SELECT v / (CASE WHEN v > 150000 THEN 0 ELSE 1 END), pad FROM src_rows ORDER BY v) TO STDOUT (FORMAT binary)`, pgerrcode.DivisionByZero},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn, src, dst, _ := pipeConns(t, 200_000, tc.refuse)
			n, err := pipeCopy(ctx, src, dst, tc.out, pipeIn, nil)
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr), "want the %s's error, got %v", tc.name, err)
			require.Equal(t, tc.sqlstate, pgErr.Code, pgErr.Message)
			require.Zero(t, n)
			require.Eventually(t, func() bool { return !pipeGoroutines() }, time.Minute, 50*time.Millisecond, "a goroutine of the pipe is left")
			check := pgtest.Pool(t, dsn)
			var stored int64
			require.NoError(t, check.QueryRow(ctx, `SELECT count(*) FROM dst_rows`).Scan(&stored))
			require.Zero(t, stored)
		})
	}
}

// pipeGoroutines reports whether a goroutine runs in a copy's pipe: its
// writer, or the target's reader inside pgconn.
func pipeGoroutines() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	s := string(buf)
	return strings.Contains(s, "rebalance.pipeCopy") || strings.Contains(s, "rebalance.copyThrough") || strings.Contains(s, "(*PgConn).CopyFrom")
}
