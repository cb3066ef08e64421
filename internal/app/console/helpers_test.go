package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// secret is the password every DSN of the test clusters carries: the
// servers trust local connections, so it is never checked, only carried,
// and no page may show it.
const secret = "Sup3rS3cretPW"

// withSecret puts secret into a localpg DSN.
func withSecret(dsn string) string {
	return strings.Replace(dsn, "postgres://postgres@", "postgres://postgres:"+secret+"@", 1)
}

// testCluster is a cluster of hosts PostgreSQL databases on servers
// servers, with shards shards, initialised and migrated with
// testdata/migrations, rows rows in every shard's likes.
type testCluster struct {
	path string
	// role, when not "", is the login role (not a superuser) every DSN
	// connects as; it owns the databases (newTestClusterAs).
	role string
	// tls, when not nil, is the authority of servers of the test's own
	// with TLS on (newTestClusterOverTLS), on which every DSN connects
	// as tlsRole with sslmode=verify-full.
	tls     *pgtest.TLS
	tlsRole string
	servers []*localpg.Server
	c       *cluster.Cluster
	set     *migrate.MigrationSet
	cfg     *shardmgr.Config
}

// newTestCluster writes the cluster file (its first hosts hosts of the
// given servers; the rest can be added with addHost), runs init and the
// sample migrations and fills every shard with rows likes.
func newTestCluster(t *testing.T, servers, hosts, shards, rows int) *testCluster {
	t.Helper()
	return newTestClusterAs(t, "", servers, hosts, shards, rows)
}

// newTestClusterAs is newTestCluster with every database owned by role
// and every DSN connecting as it: a toolkit without superuser, as on a
// managed server. role "" is the servers' superuser.
func newTestClusterAs(t *testing.T, role string, servers, hosts, shards, rows int) *testCluster {
	t.Helper()
	tc := &testCluster{role: role}
	tc.build(t, pgtest.Servers(t, servers), hosts, shards, rows)
	return tc
}

// newTestClusterOverTLS is newTestCluster on servers of its own with TLS
// on (a CA of the test's own): every DSN connects with
// sslmode=verify-full as a role (a superuser) those servers refuse
// without TLS.
func newTestClusterOverTLS(t *testing.T, servers, hosts, shards, rows int) *testCluster {
	t.Helper()
	tls := pgtest.NewTLS(t)
	tc := &testCluster{tls: &tls, tlsRole: fmt.Sprintf("tls_%d", roles.Add(1))}
	for range servers {
		s := tls.Server(t, tc.tlsRole)
		pgtest.RequireTLSOnly(t, s, tc.tlsRole)
		tc.servers = append(tc.servers, s)
	}
	tc.build(t, tc.servers, hosts, shards, rows)
	return tc
}

// build writes the cluster file of hosts hosts on srv, runs init and the
// sample migrations and fills every shard with rows likes.
func (tc *testCluster) build(t *testing.T, srv []*localpg.Server, hosts, shards, rows int) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: console\nshards: %d\ncatalog: %s\nhosts:\n", shards, tc.newDB(t, srv[0]))
	for i := range hosts {
		fmt.Fprintf(&b, "  - name: pg%d\n    dsn: %s\n", i+1, tc.newDB(t, srv[i%len(srv)]))
	}
	tc.path = filepath.Join(t.TempDir(), "shardid.yaml")
	require.NoError(t, os.WriteFile(tc.path, []byte(b.String()), 0o600))
	tc.open(t)
	ctx := context.Background()
	_, err := install.Init(ctx, tc.c, install.InitOptions{})
	require.NoError(t, err)
	tc.set, err = migrate.LoadMigrationDir(filepath.Join("..", "..", "..", "testdata", "migrations"))
	require.NoError(t, err)
	_, err = migrate.Migrate(ctx, tc.c, tc.set, migrate.Options{})
	require.NoError(t, err)
	r, err := shardmgr.Open(ctx, tc.cfg)
	require.NoError(t, err)
	defer r.Close()
	for s := range shards {
		require.NoError(t, r.Tx(ctx, s, func(ctx context.Context, tx pgx.Tx, sh shardmgr.Shard) error {
			_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (user_id, post_id) SELECT g, g FROM generate_series(1, $1) g`, sh.Table("likes")), rows)
			return err
		}))
	}
}

// open (re)opens the handle on the cluster file.
func (tc *testCluster) open(t *testing.T) {
	t.Helper()
	if tc.c != nil {
		tc.c.Close()
	}
	var err error
	tc.cfg, err = shardmgr.LoadConfig(tc.path)
	require.NoError(t, err)
	tc.c, err = cluster.Open(context.Background(), tc.cfg)
	require.NoError(t, err)
	c := tc.c
	t.Cleanup(c.Close)
}

// addHost adds a host on server srv to the cluster file and the catalog
// (init), and reopens the handle.
func (tc *testCluster) addHost(t *testing.T, name string, srv int) {
	t.Helper()
	f, err := os.OpenFile(tc.path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	server := pgtest.Servers(t, srv+1)[srv]
	if tc.tls != nil {
		server = tc.servers[srv]
	}
	_, err = fmt.Fprintf(f, "  - name: %s\n    dsn: %s\n", name, tc.newDB(t, server))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	tc.open(t)
	_, err = install.Init(context.Background(), tc.c, install.InitOptions{})
	require.NoError(t, err)
}

// newDB is a new database on s for the cluster file: its DSN with the
// secret, owned by and connecting as tc.role when there is one; over TLS
// (tc.tls), connecting as tc.tlsRole with verify-full.
func (tc *testCluster) newDB(t *testing.T, s *localpg.Server) string {
	t.Helper()
	dsn := pgtest.NewDB(t, s)
	if tc.tls != nil {
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		return tc.tls.DSN(s, tc.tlsRole, strings.TrimPrefix(u.Path, "/"))
	}
	if tc.role == "" {
		return withSecret(dsn)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{conn.Config().Database}.Sanitize()+" OWNER TO "+pgx.Identifier{tc.role}.Sanitize())
	require.NoError(t, err)
	return strings.Replace(dsn, "postgres://postgres@", "postgres://"+tc.role+":"+secret+"@", 1)
}

var roles atomic.Int64

// loginRole creates a login role, not a superuser, on each of the first
// servers servers (the databases it comes to own are dropped with the
// test's databases); with pg_monitor when monitor.
func loginRole(t *testing.T, servers int, prefix string, monitor bool) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, roles.Add(1))
	ctx := context.Background()
	for _, s := range pgtest.Servers(t, servers) {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN")
		if err == nil && monitor {
			_, err = conn.Exec(ctx, "GRANT pg_monitor TO "+pgx.Identifier{name}.Sanitize())
		}
		conn.Close(ctx)
		require.NoError(t, err)
	}
	return name
}

// hostDSN is host name's DSN from the cluster file.
func (tc *testCluster) hostDSN(t *testing.T, name string) string {
	t.Helper()
	h, ok := tc.cfg.Host(name)
	require.True(t, ok, name)
	return h.DSN
}

// serve starts a console on tc with opts and returns its base URL.
func (tc *testCluster) serve(t *testing.T, opts Options) (string, *Console) {
	t.Helper()
	if opts.Migrations == nil {
		opts.Migrations = tc.set
	}
	con, err := New(tc.c, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(func() { srv.Close(); con.Close() })
	return srv.URL, con
}

// browse starts headless Chromium (Debian's chromium, /usr/bin/chromium)
// with a fresh profile and returns a tab's context, closed when the test
// ends. The flags keep it off the network: on a closed network its
// background connections would hang it.
func browse(t testing.TB) context.Context {
	t.Helper()
	path := "/usr/bin/chromium"
	if p := os.Getenv("SHARDID_CHROMIUM"); p != "" {
		path = p
	}
	_, err := os.Stat(path)
	require.NoError(t, err, "no Chromium at %s: scripts/ensure-chromium installs it", path)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first run starts the browser, which lives as long as this
	// context: no timeout on it (chromedp.Run's rule).
	require.NoError(t, chromedp.Do(ctx), "start Chromium")
	return ctx
}

// browserWait bounds one step in the browser: generous, the machine is
// shared and loaded.
const browserWait = 3 * time.Minute

// run runs steps in the tab within browserWait.
func run(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserWait)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// eval runs one action that returns a value in the tab.
func eval[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserWait)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err, what)
	return v
}

// text is the visible text of the first element css selects.
func text(t *testing.T, tab context.Context, css string) string {
	t.Helper()
	return eval(t, tab, css, chromedp.Text(chromedp.CSS(css)))
}

// textNow is the visible text of the first element css selects as the
// page holds it now ("" when there is none), read in one step in the page:
// for conditions polled while the page re-renders that element (a
// refresh replaces it), where chromedp.Text's query and read could meet
// two different nodes ("No node with given id found").
func textNow(t *testing.T, tab context.Context, css string) string {
	t.Helper()
	return eval(t, tab, css, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, css)))
}

// get fetches url and returns its status, content type and body.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	return do(t, http.MethodGet, url, nil, "")
}

// do sends a request with header TokenHeader set to token when not "".
func do(t *testing.T, method, url string, body io.Reader, token string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}
