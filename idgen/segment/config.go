package segment

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Defaults for a tag whose settings leave a field at its zero value.
const (
	DefaultMinStep = 500
	DefaultMaxStep = 20_000
	DefaultPreload = 0.2
	// MaxStepLimit bounds max_step so that a segment's id range always fits
	// in an int64 together with the stride and the random skips.
	MaxStepLimit = 1 << 30
	// MaxSkipLimit bounds max_skip for the same reason.
	MaxSkipLimit = 1 << 20
)

// ErrConfig is wrapped by every error Config.Validate returns.
var ErrConfig = errors.New("invalid segments configuration")

// Config is the segments: section of the cluster file: the source
// databases (their order is part of the id layout: the database at
// position i hands out only ids congruent to i modulo len(Sources)) and the
// business tags they serve.
type Config struct {
	Sources []string             `yaml:"sources"`
	Tags    map[string]TagConfig `yaml:"tags"`
}

// TagConfig holds the settings of one business tag. The zero value is
// valid: steps 500..20,000, plain decimal ids, consecutive.
type TagConfig struct {
	// MinStep and MaxStep bound the adaptive segment size (ids per
	// database round trip). Zero means DefaultMinStep (500) and
	// DefaultMaxStep (20000).
	MinStep int64 `yaml:"min_step"`
	MaxStep int64 `yaml:"max_step"`
	// Format renders the number into a business id, e.g.
	// "ORD-{date}-{bucket:2}-{seq:10}"; empty means the decimal number.
	// See CompileFormat.
	Format string `yaml:"format"`
	// Buckets is the number of buckets {bucket:N} spreads user keys over.
	// Zero means as many as N digits hold (10^N).
	Buckets int `yaml:"buckets"`
	// MaxSkip makes ids non-consecutive: after each id the allocator skips
	// a random 0..MaxSkip-1 numbers, so neighbours cannot be guessed. Ids
	// still increase within a source. Zero means consecutive.
	MaxSkip int64 `yaml:"max_skip"`
	// Preload is the fraction of the current segment left when the
	// background loader fetches the next one. Zero means DefaultPreload
	// (0.2).
	Preload float64 `yaml:"preload"`
}

var tagName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks the section and reports every problem in one error
// wrapping ErrConfig.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: no segments section", ErrConfig)
	}
	var probs []string
	if len(c.Sources) == 0 {
		probs = append(probs, "sources: at least one database is needed")
	}
	seen := map[string]int{}
	for i, s := range c.Sources {
		if strings.TrimSpace(s) == "" {
			probs = append(probs, fmt.Sprintf("sources[%d]: empty", i))
			continue
		}
		if j, dup := seen[s]; dup {
			probs = append(probs, fmt.Sprintf("sources[%d]: same database as sources[%d]", i, j))
		}
		seen[s] = i
	}
	if len(c.Tags) == 0 {
		probs = append(probs, "tags: at least one tag is needed")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tags)) {
		if !tagName.MatchString(name) {
			probs = append(probs, fmt.Sprintf("tags.%s: name must be 1-64 of A-Z a-z 0-9 _ . -", name))
		}
		if err := c.Tags[name].validate(); err != nil {
			probs = append(probs, fmt.Sprintf("tags.%s: %v", name, err))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(probs, "; "))
	}
	return nil
}

func (t TagConfig) validate() error {
	var probs []string
	d := t.withDefaults()
	if t.MinStep < 0 || t.MaxStep < 0 {
		probs = append(probs, "min_step and max_step must be positive")
	} else if d.MinStep > d.MaxStep {
		probs = append(probs, fmt.Sprintf("min_step %d is above max_step %d", d.MinStep, d.MaxStep))
	}
	if d.MaxStep > MaxStepLimit {
		probs = append(probs, fmt.Sprintf("max_step %d is above %d", d.MaxStep, MaxStepLimit))
	}
	if t.MaxSkip < 0 || t.MaxSkip > MaxSkipLimit {
		probs = append(probs, fmt.Sprintf("max_skip must be within 0..%d", MaxSkipLimit))
	}
	if t.Preload < 0 || t.Preload >= 1 {
		probs = append(probs, "preload must be a fraction within [0, 1)")
	}
	if t.Buckets < 0 {
		probs = append(probs, "buckets must be positive")
	}
	if t.Format != "" {
		f, err := CompileFormat(t.Format)
		if err != nil {
			probs = append(probs, err.Error())
		} else if err := f.setBuckets(t.Buckets); err != nil {
			probs = append(probs, err.Error())
		}
	} else if t.Buckets != 0 {
		probs = append(probs, "buckets needs a format with {bucket:N}")
	}
	if len(probs) > 0 {
		return errors.New(strings.Join(probs, ", "))
	}
	return nil
}

func (t TagConfig) withDefaults() TagConfig {
	if t.MinStep == 0 {
		t.MinStep = DefaultMinStep
	}
	if t.MaxStep == 0 {
		t.MaxStep = max(DefaultMaxStep, t.MinStep)
	}
	if t.Preload == 0 {
		t.Preload = DefaultPreload
	}
	return t
}
