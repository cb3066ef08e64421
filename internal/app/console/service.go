package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeTimeout bounds one read of the ID service's /metrics.
const scrapeTimeout = 10 * time.Second

// Service is the ID service panel's data, from the serve's /metrics (the
// same numbers Prometheus scrapes), JSON at /api/service:
//
//	{"url":"http://...","scraped":"RFC 3339","tags":[{"tag":"order","served":N,"rate":N,
//	  "in_memory":N,"step":N,"loads":N,"load_failures":N}],
//	 "sources":[{"source":"0","name":"seg1","breaker":"closed","loads":N,"failures":N}],
//	 "requests":{"200":N}}
//
// Rate is ids per second served since the console's previous scrape
// (absent on the first).
type Service struct {
	URL      string           `json:"url"`
	Scraped  time.Time        `json:"scraped"`
	Tags     []TagStats       `json:"tags"`
	Sources  []SourceStats    `json:"sources"`
	Requests map[string]int64 `json:"requests"`
}

// TagStats is one business tag's numbers.
type TagStats struct {
	Tag          string   `json:"tag"`
	Served       int64    `json:"served"`
	Rate         *float64 `json:"rate,omitempty"`
	InMemory     int64    `json:"in_memory"`
	Step         int64    `json:"step"`
	Loads        int64    `json:"loads"`
	LoadFailures int64    `json:"load_failures"`
}

// SourceStats is one source database's health.
type SourceStats struct {
	Source   string `json:"source"`
	Name     string `json:"name"`
	Breaker  string `json:"breaker"` // closed, open, half-open
	Loads    int64  `json:"loads"`
	Failures int64  `json:"failures"`
}

// scrapePoint remembers a scrape for the next one's rates.
type scrapePoint struct {
	at     time.Time
	served map[string]int64
}

// readService scrapes the serve's /metrics.
func (s *Console) readService(ctx context.Context) (*Service, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	url := s.opts.ServeURL + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	shown := s.serveShown + "/metrics"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) { // its URL would carry the password
			err = ue.Err
		}
		return nil, fmt.Errorf("ID service: GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("ID service: GET %s: %s", shown, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("ID service: read %s: %w", shown, err)
	}
	svc := summarise(fams)
	svc.URL, svc.Scraped = s.serveShown, time.Now().UTC()

	s.mu.Lock()
	prev := s.scrape
	cur := &scrapePoint{at: svc.Scraped, served: map[string]int64{}}
	for i, t := range svc.Tags {
		cur.served[t.Tag] = t.Served
		if prev != nil {
			if before, ok := prev.served[t.Tag]; ok && t.Served >= before {
				if dt := svc.Scraped.Sub(prev.at).Seconds(); dt > 0 {
					r := float64(t.Served-before) / dt
					svc.Tags[i].Rate = &r
				}
			}
		}
	}
	s.scrape = cur
	s.mu.Unlock()
	return svc, nil
}

// summarise picks shardid's segment metrics out of a scrape.
func summarise(fams map[string]*dto.MetricFamily) *Service {
	svc := &Service{Tags: []TagStats{}, Sources: []SourceStats{}, Requests: map[string]int64{}}
	tags := map[string]*TagStats{}
	tag := func(name string) *TagStats {
		if tags[name] == nil {
			tags[name] = &TagStats{Tag: name}
		}
		return tags[name]
	}
	sources := map[string]*SourceStats{}
	source := func(m *dto.Metric) *SourceStats {
		idx, name := label(m, "source"), label(m, "name")
		if sources[idx] == nil {
			sources[idx] = &SourceStats{Source: idx, Name: name}
		}
		return sources[idx]
	}
	each := func(name string, f func(m *dto.Metric, v int64)) {
		if fam := fams[name]; fam != nil {
			for _, m := range fam.GetMetric() {
				f(m, int64(value(m)))
			}
		}
	}
	each("shardid_segment_ids_served_total", func(m *dto.Metric, v int64) { tag(label(m, "tag")).Served = v })
	each("shardid_segment_ids_in_memory", func(m *dto.Metric, v int64) { tag(label(m, "tag")).InMemory = v })
	each("shardid_segment_step", func(m *dto.Metric, v int64) { tag(label(m, "tag")).Step = v })
	each("shardid_segment_loads_total", func(m *dto.Metric, v int64) { tag(label(m, "tag")).Loads = v })
	each("shardid_segment_load_failures_total", func(m *dto.Metric, v int64) { tag(label(m, "tag")).LoadFailures = v })
	each("shardid_segment_source_breaker_state", func(m *dto.Metric, v int64) {
		source(m).Breaker = map[int64]string{0: "closed", 1: "open", 2: "half-open"}[v]
	})
	each("shardid_segment_source_loads_total", func(m *dto.Metric, v int64) { source(m).Loads = v })
	each("shardid_segment_source_failures_total", func(m *dto.Metric, v int64) { source(m).Failures = v })
	each("shardid_segment_http_requests_total", func(m *dto.Metric, v int64) { svc.Requests[label(m, "code")] = v })
	for _, t := range tags {
		svc.Tags = append(svc.Tags, *t)
	}
	slices.SortFunc(svc.Tags, func(a, b TagStats) int { return strings.Compare(a.Tag, b.Tag) })
	for _, src := range sources {
		svc.Sources = append(svc.Sources, *src)
	}
	slices.SortFunc(svc.Sources, func(a, b SourceStats) int { return strings.Compare(a.Source, b.Source) })
	return svc
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func (s *Console) pageService(w http.ResponseWriter, r *http.Request) {
	if s.opts.ServeURL == "" {
		s.page(w, http.StatusNotFound, "error.html", "service", "ID service", "no ID service: start the console with --serve-url http://HOST:PORT of a running shardid serve")
		return
	}
	s.page(w, http.StatusOK, "service.html", "service", "ID service", s.serveShown)
}

func (s *Console) partService(w http.ResponseWriter, r *http.Request) {
	if s.opts.ServeURL == "" {
		http.NotFound(w, r)
		return
	}
	svc, err := s.readService(r.Context())
	if err != nil {
		s.render(w, http.StatusBadGateway, "error-part", err.Error())
		return
	}
	s.render(w, http.StatusOK, "service-part", svc)
}

// apiService is the ID service's metrics, summed up (Service).
func (s *Console) apiService(w http.ResponseWriter, r *http.Request) {
	if s.opts.ServeURL == "" {
		writeError(w, http.StatusNotFound, "no ID service: start the console with --serve-url")
		return
	}
	svc, err := s.readService(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, svc)
}
