// Package serveconfig reads the sections of the cluster file that only
// `shardid serve` uses: segments: (the segment allocator) and snowflake:
// (the snowflake id service). They live here, not in package shardmgr, so
// that an application importing shardmgr for the router links neither
// idgen/segment, idgen/snowflake nor net/http. The file format is the
// cluster file's: serve checks the cluster part as every command does
// (shardmgr.ParseConfig) and these sections itself.
package serveconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/shardid/shardid/idgen/segment"
	"github.com/shardid/shardid/idgen/snowflake"
	"github.com/shardid/shardid/internal/envvar"
	"github.com/shardid/shardid/shardmgr"
)

// Sections are serve's sections of a cluster file, their ${VAR}s expanded.
// A section the file does not have is nil.
type Sections struct {
	Segments  *segment.Config
	Snowflake *snowflake.Config
}

// file is the shape serve reads: its sections, every other key left to
// shardmgr.ParseConfig.
type file struct {
	Segments  *segment.Config      `yaml:"segments"`
	Snowflake *snowflake.Config    `yaml:"snowflake"`
	Rest      map[string]yaml.Node `yaml:",inline"`
}

// Load reads the cluster file at path: the cluster part checked by
// shardmgr.ParseConfig (syntax, unknown keys, ${VAR}s in DSNs), then the
// sections, unknown keys in them errors and their ${VAR}s expanded with
// lookup (os.LookupEnv in a command); a variable lookup does not know is
// an error naming it.
func Load(path string, lookup func(string) (string, bool)) (*Sections, error) {
	data, err := read(path)
	if err != nil {
		return nil, err
	}
	if _, err := shardmgr.ParseConfig(data, path, lookup); err != nil {
		return nil, err
	}
	return Parse(data, path, lookup)
}

// read reads at most shardmgr.MaxConfigSize bytes of path, as LoadConfig.
func read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// The cluster part's loader words it ("PATH not found").
			_, err = shardmgr.LoadConfig(path)
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, shardmgr.MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", shardmgr.ErrConfig, err)
	}
	if len(data) > shardmgr.MaxConfigSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", shardmgr.ErrConfig, path, shardmgr.MaxConfigSize)
	}
	return data, nil
}

// Parse reads serve's sections from a cluster file held in data (name is
// used in messages); it does not check the cluster part.
func Parse(data []byte, name string, lookup func(string) (string, bool)) (*Sections, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: %s", shardmgr.ErrConfig, name, yamlMessage(err))
	}
	s := &Sections{Segments: f.Segments, Snowflake: f.Snowflake}
	if s.Segments != nil {
		var missing []string
		for i, src := range s.Segments.Sources {
			var m []string
			var err error
			if s.Segments.Sources[i], m, err = envvar.ExpandDSN(src, lookup); err != nil {
				return nil, fmt.Errorf("%s: %w: sources[%d]: %v", name, segment.ErrConfig, i, err)
			}
			missing = append(missing, m...)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s: %w: sources: environment variable %s not set", name, segment.ErrConfig, strings.Join(missing, ", "))
		}
	}
	if s.Snowflake != nil {
		leases, missing, err := envvar.ExpandDSN(s.Snowflake.Leases, lookup)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: snowflake.leases: %v", name, snowflake.ErrInvalidSettings, err)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s: %w: snowflake.leases: environment variable %s not set", name, snowflake.ErrInvalidSettings, strings.Join(missing, ", "))
		}
		s.Snowflake.Leases = leases
	}
	return s, nil
}

var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)

// yamlMessage is the decoder's error on one line, as the cluster part's
// ("line 4: unknown key \"min_stp\"").
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			if m := unknownField.FindStringSubmatch(e); m != nil {
				key := m[2]
				if len(key) > 80 {
					key = key[:80] + "..."
				}
				msgs[i] = fmt.Sprintf("line %s: unknown key %q", m[1], key)
			} else {
				msgs[i] = e
			}
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
