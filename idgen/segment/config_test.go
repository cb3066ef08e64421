package segment_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/shardid/shardid/idgen/segment"
)

// The shape the cluster file must accept (issue 6, section 4).
const issueExample = `
segments:
  sources:
    - postgres://postgres@127.0.0.1:5433/seg
    - postgres://postgres@127.0.0.1:5434/seg
    - postgres://postgres@127.0.0.1:5435/seg
  tags:
    payment: {}
    order:
      min_step: 500
      max_step: 20000
      format: "ORD-{date}-{seq:10}"
`

func decode(t *testing.T, text string) (*segment.Config, error) {
	t.Helper()
	var file struct {
		Segments *segment.Config `yaml:"segments"`
	}
	dec := yaml.NewDecoder(strings.NewReader(text))
	dec.KnownFields(true)
	err := dec.Decode(&file)
	return file.Segments, err
}

func TestConfigFromYAML(t *testing.T) {
	t.Parallel()
	cfg, err := decode(t, issueExample)
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Len(t, cfg.Sources, 3)
	require.Equal(t, segment.TagConfig{MinStep: 500, MaxStep: 20000, Format: "ORD-{date}-{seq:10}"}, cfg.Tags["order"])
	require.Equal(t, segment.TagConfig{}, cfg.Tags["payment"])

	_, err = decode(t, "segments:\n  sources: [a]\n  tags:\n    x: {min_stp: 3}\n")
	require.Error(t, err, "unknown keys are refused")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := func() segment.Config {
		return segment.Config{Sources: []string{"postgres://a/seg", "postgres://b/seg"}, Tags: map[string]segment.TagConfig{"order": {}}}
	}
	for name, mutate := range map[string]func(*segment.Config){
		"no sources":        func(c *segment.Config) { c.Sources = nil },
		"empty source":      func(c *segment.Config) { c.Sources[1] = " " },
		"same source twice": func(c *segment.Config) { c.Sources[1] = c.Sources[0] },
		"no tags":           func(c *segment.Config) { c.Tags = nil },
		"bad tag name":      func(c *segment.Config) { c.Tags["a b"] = segment.TagConfig{} },
		"min above max":     func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{MinStep: 10, MaxStep: 5} },
		"negative step":     func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{MinStep: -1} },
		"huge step":         func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{MaxStep: 1 << 40} },
		"bad format":        func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{Format: "ORD-{sq}"} },
		"bad skip":          func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{MaxSkip: -1} },
		"bad preload":       func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{Preload: 1} },
		"buckets, no field": func(c *segment.Config) { c.Tags["order"] = segment.TagConfig{Buckets: 4} },
	} {
		c := ok()
		require.NoError(t, c.Validate())
		mutate(&c)
		require.ErrorIs(t, c.Validate(), segment.ErrConfig, name)
	}
	var nilCfg *segment.Config
	require.ErrorIs(t, nilCfg.Validate(), segment.ErrConfig)
}
