package rebalance

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/testkit/clustertest"
	"github.com/shardid/shardid/shardmgr/internal/testkit/installtest"
	"github.com/shardid/shardid/shardmgr/migrate"
)

// Strings that break out of a literal quoted for the wrong
// standard_conforming_strings.
var hostileStrings = []string{
	`' PUBLICATION "p" WITH (connect = false); CREATE TABLE public.pwned(); --`,
	`\' PUBLICATION "p" WITH (connect = false); CREATE TABLE public.pwned(); --`,
	`\\' PUBLICATION "p" WITH (connect = false); CREATE TABLE public.pwned(); --`,
	`\\\'; CREATE TABLE public.pwned(); --`,
	`x\`, `\`, `'`, `''`, `\\`, `a\nb\tc`, `$$; CREATE TABLE public.pwned(); --`, `E'x'`, `ünï'cödé\`,
}

// withPassword is dsn with its user's password set to pw.
func withPassword(t testing.TB, dsn, pw string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

func databaseOf(t testing.TB, dsn string) string {
	t.Helper()
	pc, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	return pc.Database
}

// A literal from quoteLiteral reads back as written with
// standard_conforming_strings on or off.
func TestQuoteLiteralEitherSetting(t *testing.T) {
	t.Parallel()
	p := clustertest.Pool(t, pgtest.NewDB(t, pgtest.Servers(t, 1)[0]))
	conn, err := p.Acquire(clustertest.Ctx(t))
	require.NoError(t, err)
	defer conn.Release()
	for _, scs := range []string{"on", "off"} {
		_, err := conn.Exec(clustertest.Ctx(t), "SET standard_conforming_strings = "+scs)
		require.NoError(t, err)
		for _, s := range hostileStrings {
			// A simple query, as pgx sends a statement without
			// arguments; pgx itself refuses those with the setting off.
			res, err := conn.Conn().PgConn().Exec(clustertest.Ctx(t), "SELECT "+pg.QuoteLiteral(s)).ReadAll()
			require.NoError(t, err, "%s: %s", scs, s)
			require.Len(t, res, 1, "one statement")
			require.Len(t, res[0].Rows, 1)
			require.Equal(t, s, string(res[0].Rows[0][0]), "standard_conforming_strings = %s", scs)
		}
	}
	_, err = conn.Exec(clustertest.Ctx(t), "RESET standard_conforming_strings")
	require.NoError(t, err)
}

// Every session the toolkit opens has standard_conforming_strings on,
// whatever the database says.
func TestSessionsPinStandardConformingStrings(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	h, _ := cfg.Host("pg1")
	_, err := clustertest.Pool(t, h.DSN).Exec(clustertest.Ctx(t), fmt.Sprintf(`ALTER DATABASE %s SET standard_conforming_strings = off`, pgx.Identifier{databaseOf(t, h.DSN)}.Sanitize()))
	require.NoError(t, err)
	show := func(q shardmgr.Querier) string {
		var v string
		require.NoError(t, q.QueryRow(clustertest.Ctx(t), `SHOW standard_conforming_strings`).Scan(&v))
		return v
	}
	require.Equal(t, "off", show(clustertest.Pool(t, h.DSN)), "the database's setting")

	p, err := pg.OpenPool(clustertest.Ctx(t), h.DSN, 1)
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, "on", show(p))
	c, err := pg.Connect(clustertest.Ctx(t), h.DSN)
	require.NoError(t, err)
	require.Equal(t, "on", show(c))
	require.NoError(t, c.Close(clustertest.Ctx(t)))
	r := openRouter(t, cfg, shardmgr.WithPoolConfig(func(host string, pc *pgxpool.Config) {
		pc.ConnConfig.RuntimeParams["standard_conforming_strings"] = "off"
	}))
	require.NoError(t, r.ReadTx(clustertest.Ctx(t), 0, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		require.Equal(t, "on", show(tx))
		return nil
	}))
}

// A move whose source DSN carries a password made to break out of
// CREATE SUBSCRIPTION's literal, into a target database with
// standard_conforming_strings off: the subscription gets the conninfo as
// written, nothing else runs, and the move finishes.
func TestMoveConnInfoCannotInject(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 6)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	dst := clustertest.HostPool(t, cfg, "pg3")
	h, _ := cfg.Host("pg3")
	_, err = dst.Exec(clustertest.Ctx(t), fmt.Sprintf(`ALTER DATABASE %s SET standard_conforming_strings = off`, pgx.Identifier{databaseOf(t, h.DSN)}.Sanitize()))
	require.NoError(t, err)
	for i, pw := range hostileStrings[:3] {
		shard := []int{0, 1, 3}[i]
		var conninfo string
		opts := MoveOptions{Migrations: sampleSet(t), Keep: new(time.Duration)}
		// The servers trust local connections: the password travels but
		// is not checked.
		opts.ConnInfo = func(src shardmgr.Host) (string, error) {
			var err error
			conninfo, err = libpqConnInfo(withPassword(t, src.DSN, pw))
			return conninfo, err
		}
		opts.stopAfter = PhaseCopy
		mctx, cancel := context.WithTimeout(clustertest.Ctx(t), time.Minute)
		_, err := MoveShard(mctx, clustertest.Handle(t, cfg), shard, "pg3", opts)
		require.ErrorIs(t, err, errStopped, pw)
		var got string
		require.NoError(t, dst.QueryRow(clustertest.Ctx(t), `SELECT subconninfo FROM pg_subscription
			WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&got))
		require.Equal(t, conninfo, got)
		require.Contains(t, got, "password=")
		opts.stopAfter = ""
		_, err = MoveShard(mctx, clustertest.Handle(t, cfg), shard, "pg3", opts)
		cancel()
		require.NoError(t, err, pw)
		for _, host := range cfg.Hosts {
			var pwned bool
			require.NoError(t, clustertest.HostPool(t, cfg, host.Name).QueryRow(clustertest.Ctx(t), `SELECT to_regclass('public.pwned') IS NOT NULL`).Scan(&pwned))
			require.False(t, pwned, "%s: injected SQL ran on %s", pw, host.Name)
		}
	}
	requireVerifyOK(t, cfg)
}

// A CREATE SUBSCRIPTION that fails leaves the source's password out of
// the target's server log.
func TestMoveKeepsPasswordOutOfServerLog(t *testing.T) {
	t.Parallel()
	cfg := installtest.Cluster(t, 3)
	_, err := migrate.Migrate(clustertest.Ctx(t), clustertest.Handle(t, cfg), sampleSet(t), migrate.Options{})
	require.NoError(t, err)
	pw := fmt.Sprintf("pw-%s-S3cret", cfg.Cluster)
	missing := cfg.Cluster + "_no_such_db"
	opts := MoveOptions{Migrations: sampleSet(t)}
	opts.ConnInfo = func(src shardmgr.Host) (string, error) {
		u, err := url.Parse(withPassword(t, src.DSN, pw))
		if err != nil {
			return "", err
		}
		u.Path = "/" + missing
		return libpqConnInfo(u.String())
	}
	_, err = MoveShard(clustertest.Ctx(t), clustertest.Handle(t, cfg), 0, "pg3", opts)
	require.ErrorContains(t, err, "create subscription")
	t.Cleanup(func() { AbortMove(context.Background(), clustertest.Handle(t, cfg), nil) })

	b, err := os.ReadFile(pgtest.Servers(t, 3)[2].LogPath())
	require.NoError(t, err)
	with := func(s string) (lines []string) {
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, s) {
				lines = append(lines, line)
			}
		}
		return lines
	}
	require.NotEmpty(t, with(missing), "the target logs the failure")
	require.Empty(t, with(pw), "the password is in the target's log")
}

// A role that may not change the log settings gets an error and a
// transaction that still works.
func TestQuietStatementLogRefused(t *testing.T) {
	t.Parallel()
	s := pgtest.Servers(t, 1)[0]
	dsn := pgtest.NewDB(t, s)
	role := fmt.Sprintf("nosu_%d", clustertest.DBCounter.Add(1))
	admin := clustertest.Pool(t, dsn)
	_, err := admin.Exec(clustertest.Ctx(t), `CREATE ROLE `+role+` LOGIN`)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	p, err := pg.OpenPool(clustertest.Ctx(t), u.String(), 1)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, pgx.BeginFunc(clustertest.Ctx(t), p, func(tx pgx.Tx) error {
		require.ErrorContains(t, quietStatementLog(clustertest.Ctx(t), tx), "log_min_error_statement")
		_, err := tx.Exec(clustertest.Ctx(t), `SELECT 1`)
		return err
	}))
}

// A DSN that does not parse is never repeated in the error, in any
// spelling of its password. Failed before: "cannot parse DSN: cannot
// parse `host=h password = s3cret ...`" (pgx masks only some spellings).
func TestConnInfoParseErrorHidesDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"host=h password = s3cret sslmode=bogus",
		"host=h password= s3cret port=abc",
		"host=h user=u password ='s3cret' sslmode=nope",
		"postgres://u:s3cret@h:9x/db",
		"postgres://u:s3cret@h/db?sslmode=bogus",
		"postgres://u:s3%zzcret@h/db",
		"postgresql://u:s3cret@h/db?sslmode=require&%zz=1",
		"host=h password='s3cret",
	} {
		for _, f := range []func(string) (string, error){libpqConnInfo, func(d string) (string, error) { return libpqConnInfoWithout(d, "password") }} {
			_, err := f(dsn)
			require.Error(t, err, dsn)
			require.NotContains(t, err.Error(), "s3", dsn)
			require.NotContains(t, err.Error(), "cret", dsn)
			require.Contains(t, err.Error(), "cannot parse", dsn)
		}
	}
}
