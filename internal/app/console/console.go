package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/shardid/shardid/internal/loopback"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/hosts"
	"github.com/shardid/shardid/shardmgr/install"
	"github.com/shardid/shardid/shardmgr/migrate"
	"github.com/shardid/shardid/shardmgr/rebalance"
	"github.com/shardid/shardid/shardmgr/verify"
)

//go:embed assets templates
var files embed.FS

// DefaultListen is where the console listens unless told: loopback only.
const DefaultListen = "127.0.0.1:8090"

// TokenHeader carries the action token on an action request.
const TokenHeader = "X-Shardid-Token"

// Options configure a Console. The zero value is a read-only console
// without the migrations panel and the ID service panel.
type Options struct {
	// Migrations are the shards' migrations, for the migration status
	// panel; nil leaves it out (it says how to add it).
	Migrations *migrate.MigrationSet
	// MigrationsDir is where Migrations came from, shown on the page.
	MigrationsDir string
	// ConfigPath is the cluster file's path, shown in the hints the pages
	// give (shardid rebalance abort --config PATH ...).
	ConfigPath string
	// ServeURL is the base URL of a running `shardid serve`
	// (http://127.0.0.1:8080) whose /metrics the ID service panel reads;
	// "" leaves the panel out. A password in it (http://user:pw@host,
	// for a proxy's basic authentication) is sent, never shown.
	ServeURL string
	// Actions turns on the actions that change the cluster: rebalance
	// apply, abort and cleanup. Each then needs Token and a confirmation.
	Actions bool
	// SampleEvery is how often the console samples each host's
	// connections, transactions per second and replication lag (the map
	// shows the last 15 minutes); zero means DefaultSampleEvery, less
	// than zero samples nothing.
	SampleEvery time.Duration
	// Now is the console's clock for the samples; nil is time.Now.
	Now func() time.Time
	// Token is the secret an action request carries in TokenHeader;
	// required with Actions (NewToken makes one).
	Token string
	// UserHeader names the request header that says who sends an action
	// request (X-Forwarded-User, set by an authenticating proxy in front
	// of the console), for the audit log; "" or a request without it
	// records the client's address. The console trusts the header as it
	// comes: only a proxy that sets it on every request (and drops what
	// the client sent) makes it mean who.
	UserHeader string
	// AllowRemote accepts requests whatever their Host header; without
	// it only loopback names are served (a guard against DNS rebinding).
	AllowRemote bool
	// Refresh is how often the map and the moves refresh in the browser.
	// Zero means 2 s.
	Refresh time.Duration
	// Logger receives the actions taken and failed requests; nil
	// discards them.
	Logger *slog.Logger
	// Reopen opens a handle on the cluster file as it is now, validated
	// as at startup: the console calls it when the catalog's hosts change
	// or it meets a host its handle does not know (a host added since it
	// started), and serves from the new handle; on an error it keeps the
	// handle it has and says so on the map. Nil rereads the handle's
	// Config().Path with the handle's connection budget and logger.
	Reopen func(ctx context.Context) (*cluster.Cluster, error)
}

// Console serves the pages of one cluster handle. Build it with New.
type Console struct {
	opts Options
	// serveShown is opts.ServeURL without its password: what pages, JSON
	// and errors show.
	serveShown string
	tmpl       *template.Template
	log        *slog.Logger
	// readMap reads what the map shows (readMapOf; a synthetic map in
	// the benchmarks).
	readMap func(ctx context.Context, c *cluster.Cluster) (*install.Status, []rebalance.KeptCopy, error)
	// readHosts reads each host's identity (readHostsOf; nil in the
	// benchmarks, whose hosts are synthetic).
	readHosts func(ctx context.Context, c *cluster.Cluster) ([]hosts.Host, error)

	// hmu guards the handle in use and what the rereads of the cluster
	// file found (handle.go).
	hmu    sync.Mutex
	cur    *handle
	reload reloadState

	metrics *metrics // the hosts' samples (metrics.go)
	now     func() time.Time

	// ctx outlives requests: the work an action starts (an apply) runs on
	// it until Close.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	lastVerify *verifyRun    // the last verify this console ran
	verifying  bool          // a verify runs
	action     *actionState  // the last action started
	scrape     *scrapePoint  // the ID service's last scrape, for rates
	identity   *identityRead // the hosts' identities the map last read
}

// identityRead is one read of the hosts' identities, kept for the map's
// refreshes (identityTTL).
type identityRead struct {
	at   time.Time
	list []hosts.Host
	err  error
}

// New builds a console on c. The options are checked here.
func New(c *cluster.Cluster, opts Options) (*Console, error) {
	if c == nil {
		return nil, errors.New("console: no cluster handle")
	}
	if h := opts.UserHeader; h != "" && !validHeaderName(h) {
		return nil, fmt.Errorf("console: user header %q: not a header name (letters, digits and -)", h)
	}
	if opts.Actions && len(opts.Token) < 16 {
		return nil, errors.New("console: actions need a token of at least 16 characters")
	}
	var serveShown string
	if opts.ServeURL != "" {
		u, err := url.Parse(opts.ServeURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("console: serve URL: want http://host:port (the URL given does not parse as one)")
		}
		opts.ServeURL = strings.TrimRight(opts.ServeURL, "/")
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		serveShown = strings.TrimRight(u.String(), "/")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	if opts.Reopen == nil {
		opts.Reopen = reopenFile(c)
	}
	if opts.SampleEvery == 0 {
		opts.SampleEvery = DefaultSampleEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Console{opts: opts, serveShown: serveShown, tmpl: tmpl, log: opts.Logger, readMap: readMapOf, readHosts: readHostsOf,
		cur: &handle{c: c}, reload: reloadState{goodAt: time.Now()}, now: opts.Now, ctx: ctx, cancel: cancel}
	if opts.SampleEvery > 0 {
		s.metrics = newMetrics(opts.SampleEvery)
		go s.sampleLoop()
	}
	return s, nil
}

// Close stops the work actions started (an apply stops where a crash
// would, resumable) and closes the handles the console opened on a
// reread of the cluster file; the handle given to New is the caller's.
func (s *Console) Close() {
	s.cancel()
	s.closeHandles()
}

// NewToken returns a random action token.
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// CheckListen refuses an address that is not loopback unless
// allowRemote: the console has no TLS and its read-only pages show the
// whole cluster's layout.
func CheckListen(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if allowRemote || loopback.IsName(host) {
		return nil
	}
	return fmt.Errorf("listen address %q is not loopback: the console has no TLS and shows the cluster's layout to whoever reaches it", addr)
}

// Handler serves the console's pages, assets and JSON.
func (s *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(files, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", s.pageMap)
	mux.HandleFunc("GET /part/map", s.partMap)
	mux.HandleFunc("GET /part/shard/{id}", s.partShard)
	mux.HandleFunc("GET /moves", s.pageMoves)
	mux.HandleFunc("GET /part/moves", s.partMoves)
	mux.HandleFunc("GET /checks", s.pageChecks)
	mux.HandleFunc("GET /part/migrations", s.partMigrations)
	mux.HandleFunc("GET /part/verify", s.partVerify)
	mux.HandleFunc("GET /decode", s.pageDecode)
	mux.HandleFunc("GET /service", s.pageService)
	mux.HandleFunc("GET /audit", s.pageAudit)
	mux.HandleFunc("GET /part/service", s.partService)

	// JSON, in the shapes of the CLI's --json.
	mux.HandleFunc("GET /api/status", s.apiStatus)             // shardid status --json
	mux.HandleFunc("GET /api/hosts", s.apiHosts)               // shardid host list --json
	mux.HandleFunc("GET /api/moves", s.apiMoves)               // shardid rebalance status [--all] --json
	mux.HandleFunc("GET /api/verify", s.apiLastVerify)         // shardid verify --json (the last run)
	mux.HandleFunc("POST /api/verify", s.apiRunVerify)         // runs verify, streams NDJSON
	mux.HandleFunc("GET /api/migrations", s.apiMigrations)     // shardid migrate status --json
	mux.HandleFunc("GET /api/decode", s.apiDecode)             // shardid id decode [--layout L] --json
	mux.HandleFunc("GET /api/shard/{id}", s.apiShard)          // install.ShardDetail
	mux.HandleFunc("GET /api/service", s.apiService)           // the ID service's metrics, summed up
	mux.HandleFunc("POST /api/actions/{action}", s.apiAction)  // 403 unless Options.Actions
	mux.HandleFunc("GET /api/actions/last", s.apiActionStatus) // the last action's state
	mux.HandleFunc("GET /api/audit", s.apiAudit)               // the audit log, newest first
	return s.guard(mux)
}

// guard refuses requests for another host name (DNS rebinding) and
// state-changing methods from another origin (a page elsewhere posting
// to the console), and sets headers that keep the pages to themselves.
func (s *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.opts.AllowRemote {
			if !loopback.HostAllowed(r.Host, nil) {
				http.Error(w, "console: this console serves loopback names only (start it with --allow-remote to serve others)", http.StatusMisdirectedRequest)
				return
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
				writeError(w, http.StatusForbidden, "request from another origin refused")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// validHeaderName accepts the names an HTTP header may have (RFC 9110's
// token), as a proxy would send them.
func validHeaderName(h string) bool {
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return h != ""
}

// tokenOK compares a request's token with the console's in constant time.
func (s *Console) tokenOK(r *http.Request) bool {
	got := r.Header.Get(TokenHeader)
	return s.opts.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// writeJSON writes v as the CLI's --json does (two-space indent).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError writes {"error":"..."} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// verifyRun is one verify the console ran.
type verifyRun struct {
	Deep     bool
	Started  time.Time
	Report   *verify.Report
	Err      string
	Finished time.Time
}

// Serve serves the console on ln until ctx is done, then lets requests in
// flight finish for up to 10 s. There is no write timeout: a verify
// streams for as long as it runs (each page bounds its own reads).
func (s *Console) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
