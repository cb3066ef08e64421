package httpapi

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardid/shardid/idgen/segment"
)

var (
	stepDesc = prometheus.NewDesc("shardid_segment_step",
		"Current segment size of the tag (ids per database round trip).", []string{"tag"}, nil)
	loadsDesc = prometheus.NewDesc("shardid_segment_loads_total",
		"Segments loaded from the source databases, by tag.", []string{"tag"}, nil)
	loadFailDesc = prometheus.NewDesc("shardid_segment_load_failures_total",
		"Segment loads that no source could serve, by tag.", []string{"tag"}, nil)
	inMemoryDesc = prometheus.NewDesc("shardid_segment_ids_in_memory",
		"Ids left in the current and preloaded segments, by tag.", []string{"tag"}, nil)
	breakerDesc = prometheus.NewDesc("shardid_segment_source_breaker_state",
		"Circuit breaker of a source database: 0 closed, 1 open, 2 half-open.", []string{"source", "name"}, nil)
	sourceLoadsDesc = prometheus.NewDesc("shardid_segment_source_loads_total",
		"Segments a source database handed out.", []string{"source", "name"}, nil)
	sourceFailDesc = prometheus.NewDesc("shardid_segment_source_failures_total",
		"Failed calls to a source database.", []string{"source", "name"}, nil)
)

// allocCollector reads the allocator's counters at scrape time, so the id
// path itself never touches Prometheus.
type allocCollector struct{ a *segment.Allocator }

func (c *allocCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{stepDesc, loadsDesc, loadFailDesc, inMemoryDesc, breakerDesc, sourceLoadsDesc, sourceFailDesc} {
		ch <- d
	}
}

func (c *allocCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.a.Stats() {
		ch <- prometheus.MustNewConstMetric(stepDesc, prometheus.GaugeValue, float64(t.Step), t.Name)
		ch <- prometheus.MustNewConstMetric(loadsDesc, prometheus.CounterValue, float64(t.Loads), t.Name)
		ch <- prometheus.MustNewConstMetric(loadFailDesc, prometheus.CounterValue, float64(t.LoadFailures), t.Name)
		ch <- prometheus.MustNewConstMetric(inMemoryDesc, prometheus.GaugeValue, float64(t.InMemory), t.Name)
	}
	for _, s := range c.a.Health() {
		idx := strconv.Itoa(s.Index)
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, float64(s.BreakerState()), idx, s.Name)
		ch <- prometheus.MustNewConstMetric(sourceLoadsDesc, prometheus.CounterValue, float64(s.Loads), idx, s.Name)
		ch <- prometheus.MustNewConstMetric(sourceFailDesc, prometheus.CounterValue, float64(s.FailuresTotal), idx, s.Name)
	}
}
