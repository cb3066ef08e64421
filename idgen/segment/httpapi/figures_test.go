package httpapi_test

// The figures of docs/segments.md, measured side by side in one run:
//
//	go test -run '^$' -bench Figures -benchtime 1x -timeout 10m ./idgen/segment/httpapi
//
// Each sub-benchmark is one whole measurement (so use -benchtime 1x); it
// reports its figures as benchmark metrics and logs a table.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/segment/httpapi"
	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/internal/localpg/pgtest"
)

// benchTags: "payment" keeps the default steps (500..20,000); "bulk" lets
// the step grow to 2,000,000 ids, which a tag serving ten million ids per
// second needs so that its loader makes a few round trips per second, not
// hundreds.
var benchTags = map[string]segment.TagConfig{
	"payment": {},
	"bulk":    {MaxStep: 2_000_000},
}

// serveOn serves h on a loopback port until the benchmark ends.
func serveOn(b *testing.B, srv *http.Server) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// bareServer is the baseline: net/http returning an atomic counter.
func bareServer() *http.Server {
	var n atomic.Int64
	return &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var buf [24]byte
		w.Write(strconv.AppendInt(buf[:0], n.Add(1), 10))
	})}
}

func BenchmarkFigures(b *testing.B) {
	// The garbage collector's policy of shardid serve, for both servers
	// (and the load generator beside them).
	b.Logf("gc at %d MiB of heap: %v (false: GOGC or GOMEMLIMIT set)", httpapi.DefaultHeapLimit>>20, httpapi.LimitGC(httpapi.DefaultHeapLimit))
	servers := pgtest.Servers(b, 3)
	alloc := newAllocator(b, servers, benchTags)
	h, err := httpapi.New(alloc, httpapi.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	ours := serveOn(b, httpapi.NewServer(h))
	bare := serveOn(b, bareServer())
	// Warm up: the first segments, connections, and the step of "bulk".
	closedLoop(ours, "/v1/ids/bulk?count=1000", 4, time.Second, nil)
	closedLoop(ours, "/v1/ids/payment", 4, 500*time.Millisecond, nil)

	b.Run("inprocess", func(b *testing.B) {
		for b.Loop() {
			figureInProcess(b, alloc)
		}
	})
	b.Run("http_single", func(b *testing.B) {
		for b.Loop() {
			figureHTTPSingle(b, ours, bare)
		}
	})
	b.Run("http_fixed_5000rps", func(b *testing.B) {
		for b.Loop() {
			figureFixedRate(b, ours, bare)
		}
	})
	b.Run("http_count1000", func(b *testing.B) {
		for b.Loop() {
			figureCount1000(b, ours)
		}
	})
	b.Run("outage", func(b *testing.B) {
		for b.Loop() {
			figureOutage(b)
		}
	})
}

// figureInProcess: ids per second from 2 goroutines calling Next, and the
// latency of one call (each call timed, so the timer is in the figure).
func figureInProcess(b *testing.B, a *segment.Allocator) {
	const d = 2 * time.Second
	for _, name := range []string{"bulk", "payment"} {
		tag := a.Tag(name)
		var total atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(d)
		start := time.Now()
		for range 2 {
			wg.Go(func() {
				ctx := context.Background()
				n := int64(0)
				for time.Now().Before(stop) {
					for range 1024 {
						if _, err := tag.Next(ctx); err != nil {
							b.Error(err)
							return
						}
					}
					n += 1024
				}
				total.Add(n)
			})
		}
		wg.Wait()
		rate := float64(total.Load()) / time.Since(start).Seconds()

		// Latency: a histogram in 1 ns buckets up to 100 µs.
		hists := make([][]int64, 2)
		stop = time.Now().Add(d)
		for g := range 2 {
			wg.Go(func() {
				hist := make([]int64, 100_001)
				ctx := context.Background()
				for time.Now().Before(stop) {
					for range 1024 {
						t0 := time.Now()
						if _, err := tag.Next(ctx); err != nil {
							b.Error(err)
							return
						}
						hist[min(int64(time.Since(t0)), 100_000)]++
					}
				}
				hists[g] = hist
			})
		}
		wg.Wait()
		lat := mergeHist(hists)
		b.Logf("in process, tag %s (step now %d): %.1f M ids/s from 2 goroutines; one call p50 %v p99 %v p99.9 %v p99.99 %v (timed calls: %d)",
			name, a.Tag(name).Stats().Step, rate/1e6, lat.q(0.5), lat.q(0.99), lat.q(0.999), lat.q(0.9999), lat.n)
		if name == "bulk" {
			b.ReportMetric(rate/1e6, "Mids/s")
			b.ReportMetric(float64(lat.q(0.999).Nanoseconds()), "p99.9-ns")
		}
	}
}

type hist struct {
	buckets []int64 // nanoseconds
	n       int64
}

func mergeHist(hs [][]int64) hist {
	out := hist{buckets: make([]int64, len(hs[0]))}
	for _, h := range hs {
		for i, c := range h {
			out.buckets[i] += c
			out.n += c
		}
	}
	return out
}

func (h hist) q(p float64) time.Duration {
	want := int64(p * float64(h.n))
	var seen int64
	for i, c := range h.buckets {
		seen += c
		if seen > want {
			return time.Duration(i)
		}
	}
	return time.Duration(len(h.buckets) - 1)
}

// figureHTTPSingle: single-id requests per second, ours against the bare
// handler, alternating rounds so both see the same machine.
func figureHTTPSingle(b *testing.B, ours, bare string) {
	const rounds, d, conns = 7, 1500 * time.Millisecond, 16
	var o, r, ratios []float64
	for i := range rounds {
		run := func(addr, path string) float64 {
			res := closedLoop(addr, path, conns, d, nil)
			if res.failed > 0 || res.err != nil {
				b.Fatalf("%s: %d failed: %v", addr, res.failed, res.err)
			}
			return res.rate()
		}
		if i%2 == 0 {
			o = append(o, run(ours, "/v1/ids/payment"))
			r = append(r, run(bare, "/"))
		} else {
			r = append(r, run(bare, "/"))
			o = append(o, run(ours, "/v1/ids/payment"))
		}
		ratios = append(ratios, o[i]/r[i])
	}
	mo, mr, ratio := median(o), median(r), median(ratios)
	b.Logf("HTTP single id, %d connections, %d alternating rounds of %v: ours %.0f req/s, bare net/http %.0f req/s (medians); median of the rounds' ratios %.2f (rounds: ours %.0f, bare %.0f)",
		conns, rounds, d, mo, mr, ratio, o, r)
	b.ReportMetric(mo, "req/s")
	b.ReportMetric(mr, "bare-req/s")
	b.ReportMetric(ratio, "ratio")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// figureFixedRate: 5,000 requests per second, open loop, ours and bare in
// alternating rounds so both see the same machine; the latency of each
// request from its send. The dispatcher's own wake-up lateness is the
// machine's floor: a thread asking to wake at a planned time, nothing else.
func figureFixedRate(b *testing.B, ours, bare string) {
	const rate, rounds, d, conns = 5000, 6, 5 * time.Second, 16
	var o, r loadResult
	add := func(into *loadResult, addr, path string) {
		res := fixedRate(addr, path, rate, conns, d)
		if res.err != nil || res.failed > 0 {
			b.Fatalf("%s: %d failed: %v", addr, res.failed, res.err)
		}
		into.lat = append(into.lat, res.lat...)
		into.wake = append(into.wake, res.wake...)
		into.waited += res.waited
	}
	for i := range rounds {
		if i%2 == 0 {
			add(&o, ours, "/v1/ids/payment")
			add(&r, bare, "/")
		} else {
			add(&r, bare, "/")
			add(&o, ours, "/v1/ids/payment")
		}
	}
	for _, t := range []struct {
		name string
		res  *loadResult
	}{{"ours", &o}, {"bare", &r}} {
		res := t.res
		slices.Sort(res.lat)
		slices.Sort(res.wake)
		b.Logf("HTTP fixed %d req/s, %d rounds of %v, %s: %d requests, p50 %v p99 %v p99.9 %v max %v; all %d connections busy at %d sends; dispatcher woke late by p50 %v p99 %v p99.9 %v max %v",
			rate, rounds, d, t.name, len(res.lat), qd(res.lat, 0.5), qd(res.lat, 0.99), qd(res.lat, 0.999), qd(res.lat, 1),
			conns, res.waited, qd(res.wake, 0.5), qd(res.wake, 0.99), qd(res.wake, 0.999), qd(res.wake, 1))
	}
	b.ReportMetric(float64(qd(o.lat, 0.999).Microseconds()), "p99.9-µs")
	b.ReportMetric(float64(qd(r.lat, 0.999).Microseconds()), "bare-p99.9-µs")
	b.ReportMetric(float64(qd(slices.Concat(o.wake, r.wake), 0.999).Microseconds()), "wake-p99.9-µs")
}

// BenchmarkGCPolicy measures what serve's garbage-collector policy
// (httpapi.LimitGC) does to the fixed-rate tail: our handler at 5,000
// requests per second, in alternating rounds with Go's default policy and
// with the limit, switched inside one process so both see the same machine.
//
//	go test -run '^$' -bench GCPolicy -benchtime 1x -timeout 10m ./idgen/segment/httpapi
func BenchmarkGCPolicy(b *testing.B) {
	b.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	alloc := newAllocator(b, pgtest.Servers(b, 3), benchTags)
	h, err := httpapi.New(alloc, httpapi.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	ours := serveOn(b, httpapi.NewServer(h))
	closedLoop(ours, "/v1/ids/payment", 4, 500*time.Millisecond, nil)
	policies := []string{"go default", "limit"}
	res := make([]loadResult, 2)
	gcs := make([]uint32, 2)
	for b.Loop() {
		for i := range 8 {
			for j := range 2 {
				p := (i + j) % 2
				if p == 0 {
					debug.SetMemoryLimit(math.MaxInt64)
					debug.SetGCPercent(100)
				} else {
					debug.SetMemoryLimit(httpapi.DefaultHeapLimit)
					debug.SetGCPercent(-1)
				}
				n0 := numGC()
				r := fixedRate(ours, "/v1/ids/payment", 5000, 16, 4*time.Second)
				if r.err != nil || r.failed > 0 {
					b.Fatalf("%d failed: %v", r.failed, r.err)
				}
				gcs[p] += numGC() - n0
				res[p].lat = append(res[p].lat, r.lat...)
				res[p].waited += r.waited
			}
		}
	}
	for p, name := range policies {
		slices.Sort(res[p].lat)
		b.Logf("%s: %d requests, %d collections, p50 %v p99 %v p99.9 %v max %v; all connections busy at %d sends",
			name, len(res[p].lat), gcs[p], qd(res[p].lat, 0.5), qd(res[p].lat, 0.99), qd(res[p].lat, 0.999), qd(res[p].lat, 1), res[p].waited)
	}
	b.ReportMetric(float64(qd(res[0].lat, 0.999).Microseconds()), "default-p99.9-µs")
	b.ReportMetric(float64(qd(res[1].lat, 0.999).Microseconds()), "limit-p99.9-µs")
}

func numGC() uint32 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.NumGC
}

// qd is the p quantile of sorted durations.
func qd(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// figureCount1000: ids per second with count=1000.
func figureCount1000(b *testing.B, ours string) {
	const d, conns = 3 * time.Second, 8
	res := closedLoop(ours, "/v1/ids/bulk?count=1000", conns, d, nil)
	if res.failed > 0 || res.err != nil {
		b.Fatalf("%d failed: %v", res.failed, res.err)
	}
	b.Logf("HTTP count=1000, %d connections, %v: %.0f req/s, %.1f M ids/s", conns, d, res.rate(), res.rate()*1000/1e6)
	b.ReportMetric(res.rate()*1000/1e6, "Mids/s")
}

// figureOutage: one of three sources halted and restarted during a load
// run; every response is checked and every id kept.
func figureOutage(b *testing.B) {
	own := pgtest.Own(b, localpg.Options{})
	shared := pgtest.Servers(b, 2)
	// A new slice: appending to the shared one would overwrite pgtest's
	// third server, which then never gets stopped.
	servers := []*localpg.Server{shared[0], shared[1], own}
	a := newAllocator(b, servers, map[string]segment.TagConfig{"payment": {}})
	h, err := httpapi.New(a, httpapi.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	addr := serveOn(b, httpapi.NewServer(h))
	const d, conns = 12 * time.Second, 8
	var mu sync.Mutex
	var ids []string
	keep := func(body []byte) error {
		var v struct{ IDs []string }
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		mu.Lock()
		ids = append(ids, v.IDs...)
		mu.Unlock()
		return nil
	}
	done := make(chan loadResult)
	go func() { done <- closedLoop(addr, "/v1/ids/payment?count=10", conns, d, keep) }()
	time.Sleep(d / 4)
	if err := own.Halt(); err != nil {
		b.Fatal(err)
	}
	haltedAt := time.Now()
	time.Sleep(d / 3)
	if err := own.Restart(context.Background()); err != nil {
		b.Fatal(err)
	}
	down := time.Since(haltedAt)
	res := <-done
	seen := make(map[string]struct{}, len(ids))
	dups := 0
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			dups++
		}
		seen[id] = struct{}{}
	}
	hl := a.Health()[2]
	b.Logf("outage: source 3 of 3 down for %v during a %v run, %d connections, count=10: %d requests, %d failed, %d ids, %d duplicates; breaker trips %d, state at end %s; loads per source %d/%d/%d",
		down.Round(time.Millisecond), d, conns, res.n, res.failed, len(ids), dups, hl.Trips, hl.State, a.Health()[0].Loads, a.Health()[1].Loads, hl.Loads)
	if res.err != nil || res.failed > 0 || dups > 0 {
		b.Errorf("outage run: %d failed (%v), %d duplicates", res.failed, res.err, dups)
	}
	b.ReportMetric(float64(res.failed), "failed")
	b.ReportMetric(float64(dups), "duplicates")
}

// The load generator: raw HTTP/1.1 on keep-alive connections, one request
// in flight per connection, responses read by Content-Length. It is
// lighter than net/http's client, leaving more of the 2 cores to the
// servers, and the same for both.

type loadResult struct {
	n, failed int64
	elapsed   time.Duration
	err       error
	lat       []time.Duration
	wake      []time.Duration // how late the dispatcher woke for each send
	waited    int             // sends that found every connection busy
}

func (r loadResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
	buf []byte
}

func dialRaw(addr, path string) (*rawConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 32<<10),
		req: []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: figures\r\n\r\n")}, nil
}

var errNoLength = errors.New("response without Content-Length")

// do sends the request and returns the status and body (valid until the
// next call).
func (c *rawConn) do() (int, []byte, error) {
	if _, err := c.c.Write(c.req); err != nil {
		return 0, nil, err
	}
	return c.read()
}

// read reads one response.
func (c *rawConn) read() (int, []byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	status, _ := strconv.Atoi(string(line[9:12]))
	length := -1
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 {
		return 0, nil, errNoLength
	}
	if cap(c.buf) < length {
		c.buf = make([]byte, length)
	}
	c.buf = c.buf[:length]
	if _, err := readFull(c.br, c.buf); err != nil {
		return 0, nil, err
	}
	return status, c.buf, nil
}

func readFull(br *bufio.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := br.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// closedLoop keeps conns requests in flight for d.
func closedLoop(addr, path string, conns int, d time.Duration, keep func([]byte) error) loadResult {
	var n, failed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for range conns {
		wg.Go(func() {
			c, err := dialRaw(addr, path)
			if err == nil {
				defer c.c.Close()
			}
			for err == nil && time.Now().Before(stop) {
				var status int
				var body []byte
				status, body, err = c.do()
				if err == nil && status != 200 {
					err = fmt.Errorf("status %d: %s", status, body)
				}
				if err == nil && keep != nil {
					err = keep(body)
				}
				if err != nil {
					break
				}
				n.Add(1)
			}
			if err != nil {
				failed.Add(1)
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return loadResult{n: n.Load(), failed: failed.Load(), elapsed: time.Since(start), err: firstErr}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// fixedRate sends rate requests per second for d, open loop: one
// dispatcher, on its own OS thread with a precise sleep (Go's timers wake
// an idle process only to the millisecond), writes each request at its
// planned time on a free connection, and each connection's reader records
// the latency from the write to the end of the response. Should every
// connection be busy at a planned time, the dispatcher waits and that
// request's latency counts from its planned time instead, so a slow server
// cannot hide behind a late send. How late the dispatcher itself woke is
// reported apart: it is this machine's scheduling, not the server.
func fixedRate(addr, path string, rate, conns int, d time.Duration) loadResult {
	interval := time.Second / time.Duration(rate)
	n := int(d / interval)
	type conn struct {
		*rawConn
		sent atomic.Int64 // ns since start: when the request in flight counts from
	}
	free := make(chan *conn, conns)
	lats := make([][]time.Duration, conns)
	errs := make([]error, conns+1)
	var wg sync.WaitGroup
	var all []*conn
	for range conns {
		rc, err := dialRaw(addr, path)
		if err != nil {
			return loadResult{err: err}
		}
		c := &conn{rawConn: rc}
		all = append(all, c)
		free <- c
	}
	start := time.Now().Add(20 * time.Millisecond)
	var sent atomic.Int64
	for i, c := range all {
		wg.Go(func() {
			for {
				status, body, err := c.read()
				if err == nil && status != 200 {
					err = fmt.Errorf("status %d: %s", status, body)
				}
				if err != nil {
					if sent.Load() >= 0 { // not closed by the end of the run
						errs[i] = err
					}
					return
				}
				lats[i] = append(lats[i], time.Since(start)-time.Duration(c.sent.Load()))
				free <- c
			}
		})
	}
	wake := make([]time.Duration, 0, n)
	waited := 0
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		preciseTimers()
		for k := range n {
			planned := time.Duration(k) * interval
			sleepUntil(start.Add(planned))
			wake = append(wake, time.Since(start)-planned)
			var c *conn
			from := time.Duration(0)
			select {
			case c = <-free:
				from = time.Since(start)
			default:
				waited++
				c = <-free
				from = planned
			}
			c.sent.Store(int64(from))
			if _, err := c.c.Write(c.req); err != nil {
				errs[conns] = err
				return
			}
			sent.Add(1)
		}
	}()
	for range conns { // wait for the last responses
		<-free
	}
	sent.Store(-1)
	for _, c := range all {
		c.c.Close()
	}
	wg.Wait()
	res := loadResult{err: errors.Join(errs...), wake: wake, waited: waited}
	for i := range conns {
		res.lat = append(res.lat, lats[i]...)
		if errs[i] != nil {
			res.failed++
		}
	}
	res.failed += int64(n - len(res.lat))
	slices.Sort(res.lat)
	res.n = int64(len(res.lat))
	return res
}
