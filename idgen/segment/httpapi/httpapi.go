package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardid/shardid/idgen/segment"
)

// MaxCount is the largest count one request may ask for.
const MaxCount = 1000

// Handler serves the id API of one allocator:
//
//	GET /v1/ids/{tag}?count=N[&key=K]  {"tag":"order","ids":["12345",...]}
//	GET /healthz                       per-source breaker state, per-tag step
//	GET /metrics                       Prometheus text format
//
// Errors are JSON too: {"error":"..."} with 400 for a bad count, 404 for
// an unknown tag or path, 405 for another method, 413 for a request with
// a body (no route reads one), 503 when the tag cannot be served.
type Handler struct {
	alloc    *segment.Allocator
	reg      *prometheus.Registry
	metrics  http.Handler
	served   map[string]prometheus.Counter
	codes    map[int]prometheus.Counter
	duration prometheus.Histogram
	logger   *slog.Logger
	logEvery time.Duration
	fails    map[string]*failLog
	checks   []check
	started  atomic.Bool // the allocator's first loads are done
}

// startWait bounds how long a request waits for the allocator's start-up
// (every tag's first load), below the server's 10 s write timeout.
const startWait = 8 * time.Second

// check is one more condition of readiness (WithCheck).
type check struct {
	name string
	f    func() error
}

// Option adjusts a Handler. Options are checked when New builds it: New
// returns the error of one given a value it cannot use, naming it (the
// convention of every package of shardid: see shardmgr's doc.go).
type Option func(*Handler) error

// WithRegistry registers the metrics in reg, which must not be nil.
// Without it, a registry of the handler's own (which also carries the Go
// and process collectors).
func WithRegistry(reg *prometheus.Registry) Option {
	return func(h *Handler) error {
		if reg == nil {
			return errors.New("httpapi: WithRegistry(nil): want a registry")
		}
		h.reg = reg
		return nil
	}
}

// WithLogger sets where the handler logs requests that failed on our side
// (503): a line when a tag starts failing, a summary at most every
// WithFailureLogInterval while it goes on, a line when it serves again;
// never a line per request. l must not be nil (to discard, pass
// slog.New(slog.DiscardHandler)). Without it, slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(h *Handler) error {
		if l == nil {
			return errors.New("httpapi: WithLogger(nil): want a logger (slog.New(slog.DiscardHandler) to discard)")
		}
		h.logger = l
		return nil
	}
}

// WithFailureLogInterval sets how often, at most, a tag that keeps
// failing gets a summary line; d > 0. Without it,
// DefaultFailureLogInterval (10s).
func WithFailureLogInterval(d time.Duration) Option {
	return func(h *Handler) error {
		if d <= 0 {
			return fmt.Errorf("httpapi: WithFailureLogInterval(%s): want a positive interval", d)
		}
		h.logEvery = d
		return nil
	}
}

// WithCheck adds a condition to /healthz: while f returns an error the
// handler is not ready (503) and the error is listed under problems,
// prefixed with name. serve adds the snowflake generator's this way. f
// must not be nil. Without it, readiness is the allocator's alone.
func WithCheck(name string, f func() error) Option {
	return func(h *Handler) error {
		if f == nil {
			return fmt.Errorf("httpapi: WithCheck(%q, nil): want a function", name)
		}
		h.checks = append(h.checks, check{name, f})
		return nil
	}
}

// New returns the handler for alloc.
func New(alloc *segment.Allocator, opts ...Option) (*Handler, error) {
	h := &Handler{alloc: alloc, logger: slog.Default(), logEvery: DefaultFailureLogInterval,
		served: map[string]prometheus.Counter{}, codes: map[int]prometheus.Counter{}, fails: map[string]*failLog{}}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("httpapi: nil Option")
		}
		if err := o(h); err != nil {
			return nil, err
		}
	}
	if h.reg == nil {
		h.reg = prometheus.NewRegistry()
		h.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	served := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardid_segment_ids_served_total", Help: "Ids handed out over HTTP, by tag.",
	}, []string{"tag"})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardid_segment_http_requests_total", Help: "Id requests, by status code.",
	}, []string{"code"})
	h.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "shardid_segment_http_request_duration_seconds",
		Help:    "Time to answer an id request.",
		Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3, 50e-3, 0.25, 1},
	})
	for _, c := range []prometheus.Collector{served, requests, h.duration, &allocCollector{alloc}} {
		if err := h.reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	// Resolved once, so a request does no label lookup.
	for _, tag := range alloc.Tags() {
		h.served[tag] = served.WithLabelValues(tag)
		h.fails[tag] = &failLog{tag: tag, every: h.logEvery}
	}
	for _, code := range []int{200, 400, 404, 405, 413, 503} {
		h.codes[code] = requests.WithLabelValues(strconv.Itoa(code))
	}
	h.metrics = promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{})
	return h, nil
}

// Registry returns the registry the metrics live in.
func (h *Handler) Registry() *prometheus.Registry { return h.reg }

var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// ServeHTTP routes by hand: the id path is the hot one and must not pay
// for a general router.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tag, ok := strings.CutPrefix(r.URL.Path, "/v1/ids/"); ok {
		h.ids(w, r, tag)
		return
	}
	switch r.URL.Path {
	case "/healthz":
		if !allowGet(w, r) || !NoBody(w, r) {
			return
		}
		h.health(w)
	case "/metrics":
		if !allowGet(w, r) || !NoBody(w, r) {
			return
		}
		h.metrics.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, "no such path "+strconv.Quote(r.URL.Path))
	}
}

// NoBody answers 413 and returns false when r carries a body (a length
// above zero, or chunked): nothing here reads one, and a body nobody
// reads is either a mistake or someone probing.
func NoBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength == 0 {
		return true
	}
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, "this API takes no request body")
	return false
}

func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	return false
}

type buffers struct {
	ids [MaxCount]int64
	out []byte
	tmp []byte
}

var pool = sync.Pool{New: func() any { return &buffers{out: make([]byte, 0, 4096), tmp: make([]byte, 0, 64)} }}

func (h *Handler) ids(w http.ResponseWriter, r *http.Request, name string) {
	start := time.Now()
	code := h.serveIDs(w, r, name, start)
	h.codes[code].Inc()
	h.duration.Observe(time.Since(start).Seconds())
}

func (h *Handler) serveIDs(w http.ResponseWriter, r *http.Request, name string, start time.Time) int {
	if r.Method != http.MethodGet {
		// Not even HEAD: it would use up ids nobody sees.
		w.Header().Set("Allow", "GET")
		return writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		return writeError(w, http.StatusRequestEntityTooLarge, "the id API takes no request body")
	}
	tag := h.alloc.Tag(name)
	if tag == nil {
		return writeError(w, http.StatusNotFound, "unknown tag "+strconv.Quote(name))
	}
	count, key, msg := parseQuery(r.URL.RawQuery)
	if msg != "" {
		return writeError(w, http.StatusBadRequest, msg)
	}
	if !h.started.Load() {
		ctx, cancel := context.WithTimeout(r.Context(), startWait)
		if h.alloc.WaitStarted(ctx) == nil {
			h.started.Store(true)
		}
		cancel()
	}
	b := pool.Get().(*buffers)
	defer pool.Put(b)
	ids := b.ids[:count]
	if _, err := tag.Fill(r.Context(), ids); err != nil {
		if errors.Is(err, segment.ErrUnavailable) {
			h.fails[name].failed(h.logger, time.Now(), err)
		}
		return writeError(w, http.StatusServiceUnavailable, "cannot serve tag "+strconv.Quote(name)+": "+err.Error())
	}
	out := append(b.out[:0], `{"tag":`...)
	out = appendString(out, name)
	out = append(out, `,"ids":[`...)
	f := tag.Format()
	var now time.Time
	if f != nil {
		now = h.alloc.Now()
	}
	if f == nil {
		out = appendIDs(out, ids)
	} else {
		for i, id := range ids {
			if i > 0 {
				out = append(out, ',')
			}
			b.tmp = f.Append(b.tmp[:0], id, now, key)
			out = appendString(out, string(b.tmp))
		}
	}
	out = append(out, "]}\n"...)
	b.out = out
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	hdr["Cache-Control"] = noStore
	if len(out) >= 2048 {
		// net/http sets it itself for short bodies; a long one would be
		// chunked without it.
		hdr["Content-Length"] = []string{strconv.Itoa(len(out))}
	}
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	h.served[name].Add(float64(count))
	h.fails[name].served(h.logger, start)
	return http.StatusOK
}

// parseQuery reads count (default 1) and key without building a map.
func parseQuery(q string) (count int, key, problem string) {
	count = 1
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "count":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxCount {
				return 0, "", fmt.Sprintf("count must be an integer from 1 to %d, got %q", MaxCount, v)
			}
			count = n
		case "key":
			if strings.ContainsAny(v, "%+") {
				u, err := url.QueryUnescape(v)
				if err != nil {
					return 0, "", "bad key: " + err.Error()
				}
				v = u
			}
			key = v
		}
	}
	return count, key, ""
}

// appendString appends s as a JSON string. Ids rarely need escaping, so
// the common case is a plain copy.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) int {
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	hdr["Cache-Control"] = noStore
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(errorBody{msg})
	return code
}

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok" (ready: every source usable, every tag loaded, every
	// check passed; the answer is 200), "starting" (a tag has no segment
	// yet), "degraded" (a source or a check is not usable) or "down" (no
	// source can hand out segments). All but "ok" answer 503.
	Status  string                 `json:"status"`
	Sources []segment.SourceHealth `json:"sources"`
	Tags    []segment.TagStats     `json:"tags"`
	// Problems says why the status is not ok.
	Problems []string `json:"problems,omitempty"`
}

// Ready reports whether the handler can serve every tag and pass every
// check: nil, or the problems joined.
func (h *Handler) Ready() error {
	var probs []string
	if err := h.alloc.Ready(); err != nil {
		probs = append(probs, err.Error())
	}
	for _, c := range h.checks {
		if err := c.f(); err != nil {
			probs = append(probs, c.name+": "+err.Error())
		}
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, "; "))
	}
	return nil
}

func (h *Handler) health(w http.ResponseWriter) {
	body := Health{Status: "ok", Sources: h.alloc.Health(), Tags: h.alloc.Stats()}
	up := 0
	for _, s := range body.Sources {
		if s.Usable() {
			up++
		}
	}
	loaded := true
	for _, t := range body.Tags {
		loaded = loaded && t.Loads > 0
	}
	if err := h.alloc.Ready(); err != nil {
		body.Problems = append(body.Problems, err.Error())
	}
	for _, c := range h.checks {
		if err := c.f(); err != nil {
			body.Problems = append(body.Problems, c.name+": "+err.Error())
		}
	}
	code := http.StatusOK
	switch {
	case up == 0:
		body.Status, code = "down", http.StatusServiceUnavailable
	case !loaded:
		body.Status, code = "starting", http.StatusServiceUnavailable
	case len(body.Problems) > 0:
		body.Status, code = "degraded", http.StatusServiceUnavailable
	}
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	hdr["Cache-Control"] = noStore
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(body)
}

// NewServer returns an http.Server for h with timeouts and a bound on
// header size, so slow or oversized clients cannot pile up.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// Serve serves h on ln until ctx is done, then shuts down gracefully:
// it stops accepting, lets requests in flight finish for up to grace,
// and returns nil after a clean shutdown. A request's context ends with
// ctx, so one waiting for a segment answers 503 at once rather than hold
// the shutdown.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	srv := NewServer(h)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
