package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/cluster"
)

// Per host, the console samples what an operator watches beside a
// rebalance, as pgAdmin's dashboard does: the host database's
// connections, its transactions per second (the delta of pg_stat_database's
// xact_commit + xact_rollback between two samples) and its replication lag
// (a standby's replay delay; a primary's slowest physical standby, from
// pg_stat_replication). All of it is what pg_monitor may read. The last
// metricsWindow is kept in memory, a ring per host; nothing is stored.

// metricsWindow is how far back the console keeps samples.
const metricsWindow = 15 * time.Minute

// DefaultSampleEvery is how often the console samples each host unless
// Options.SampleEvery says.
const DefaultSampleEvery = 15 * time.Second

// sampleTimeout bounds one host's sample.
const sampleTimeout = 5 * time.Second

// sampleSQL reads one sample; every part is readable with pg_monitor.
// The lag of a primary counts physical standbys only: a move's logical
// walsender is not a standby.
const sampleSQL = `SELECT d.numbackends, d.xact_commit + d.xact_rollback,
	CASE WHEN pg_catalog.pg_is_in_recovery()
		THEN EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000
		ELSE (SELECT EXTRACT(epoch FROM max(r.replay_lag)) * 1000 FROM pg_catalog.pg_stat_replication r
			WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical'))
	END::float8
	FROM pg_catalog.pg_stat_database d WHERE d.datname = pg_catalog.current_database()`

// sample is one reading of one host.
type sample struct {
	At    time.Time
	Conns int64
	Xacts int64    // xact_commit + xact_rollback, for the rate
	TPS   *float64 // since the previous sample; nil for the first
	LagMS *float64 // nil: no standby, or not a replica
	Err   string
}

// hostSamples is one host's ring of samples, oldest first.
type hostSamples struct {
	ring []sample
}

// metrics holds every host's samples.
type metrics struct {
	mu    sync.Mutex
	hosts map[string]*hostSamples
	every time.Duration
	keep  int
}

func newMetrics(every time.Duration) *metrics {
	return &metrics{hosts: map[string]*hostSamples{}, every: every, keep: max(2, int(metricsWindow/every))}
}

// add records s for host, the rate from the host's previous sample.
func (m *metrics) add(host string, s sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hosts[host]
	if h == nil {
		h = &hostSamples{}
		m.hosts[host] = h
	}
	if n := len(h.ring); n > 0 && s.Err == "" {
		prev := h.ring[n-1]
		if dt := s.At.Sub(prev.At).Seconds(); prev.Err == "" && dt > 0 && s.Xacts >= prev.Xacts {
			tps := float64(s.Xacts-prev.Xacts) / dt
			s.TPS = &tps
		}
	}
	h.ring = append(h.ring, s)
	if len(h.ring) > m.keep {
		h.ring = append(h.ring[:0], h.ring[len(h.ring)-m.keep:]...)
	}
}

// of copies host's samples.
func (m *metrics) of(host string) []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.hosts[host]; h != nil {
		return append([]sample(nil), h.ring...)
	}
	return nil
}

// sampleHost reads one sample through pool.
func sampleHost(ctx context.Context, pool *pgxpool.Pool, now time.Time) sample {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	s := sample{At: now}
	if err := pool.QueryRow(ctx, sampleSQL).Scan(&s.Conns, &s.Xacts, &s.LagMS); err != nil {
		if ctx.Err() != nil {
			s.Err = fmt.Sprintf("no answer within %s", sampleTimeout)
		} else {
			s.Err = err.Error()
		}
	}
	return s
}

// sampleAll samples every host of the handle in use, at once.
func (s *Console) sampleAll(ctx context.Context) {
	c, release := s.use()
	defer release()
	now := s.now()
	var wg sync.WaitGroup
	for _, h := range c.Config().Hosts {
		wg.Go(func() {
			pool, err := c.HostPool(ctx, h.Name, cluster.Session{Application: "shardid console metrics"})
			if err != nil {
				s.metrics.add(h.Name, sample{At: now, Err: err.Error()})
				return
			}
			s.metrics.add(h.Name, sampleHost(ctx, pool, now))
		})
	}
	wg.Wait()
}

// sampleLoop samples every Options.SampleEvery until the console closes.
func (s *Console) sampleLoop() {
	t := time.NewTicker(s.metrics.every)
	defer t.Stop()
	for {
		s.sampleAll(s.ctx)
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hostMetrics is what a host's row shows of its samples.
type hostMetrics struct {
	Conns, TPS, Lag          string // the latest values, as text
	ConnsLine, TPSLine       string // SVG polyline points, 0..100 x 0..20
	LagLine                  string
	ConnsMax, TPSMax, LagMax string
	Samples                  int
	Err                      string
}

// metricsOf lays host's samples out for its row; nil before the first.
func (s *Console) metricsOf(host string) *hostMetrics {
	if s.metrics == nil {
		return nil
	}
	ring := s.metrics.of(host)
	if len(ring) == 0 {
		return nil
	}
	last := ring[len(ring)-1]
	m := &hostMetrics{Samples: len(ring), Err: last.Err}
	var conns, tps, lag []*float64
	for _, x := range ring {
		if x.Err != "" {
			conns, tps, lag = append(conns, nil), append(tps, nil), append(lag, nil)
			continue
		}
		c := float64(x.Conns)
		conns, tps, lag = append(conns, &c), append(tps, x.TPS), append(lag, x.LagMS)
	}
	m.ConnsLine, m.ConnsMax = spark(conns, s.metrics.keep)
	m.TPSLine, m.TPSMax = spark(tps, s.metrics.keep)
	m.LagLine, m.LagMax = spark(lag, s.metrics.keep)
	if last.Err == "" {
		m.Conns = strconv.FormatInt(last.Conns, 10)
		m.TPS, m.Lag = "-", "none"
		if last.TPS != nil {
			m.TPS = strconv.FormatFloat(*last.TPS, 'f', 1, 64)
		}
		if last.LagMS != nil {
			m.Lag = strconv.FormatFloat(*last.LagMS, 'f', 0, 64) + " ms"
		}
	}
	return m
}

// spark is the points of an SVG polyline of vs (nil: a gap, skipped) in
// a 100 x 20 box, the window's keep samples across, and the largest value.
func spark(vs []*float64, keep int) (string, string) {
	top := 0.0
	for _, v := range vs {
		if v != nil && *v > top {
			top = *v
		}
	}
	var b strings.Builder
	off := keep - len(vs)
	for i, v := range vs {
		if v == nil {
			continue
		}
		y := 19.0
		if top > 0 {
			y = 19 - 18**v/top
		}
		fmt.Fprintf(&b, "%.1f,%.1f ", 100*float64(off+i)/float64(max(1, keep-1)), y)
	}
	return strings.TrimSpace(b.String()), strconv.FormatFloat(top, 'f', 1, 64)
}
