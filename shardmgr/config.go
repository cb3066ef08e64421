package shardmgr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"go.yaml.in/yaml/v3"

	"github.com/shardid/shardid/internal/envvar"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr/internal/base/limits"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	shsql "github.com/shardid/shardid/sql"
)

// DefaultConfigPath is where commands look for the cluster file when
// neither --config nor SHARDID_CONFIG says otherwise.
const DefaultConfigPath = "shardid.yaml"

// MaxShards is the largest number of logical shards: the 13 shard bits of
// the default layout.
const MaxShards = 1 << shsql.DefaultShardBits

// Config is the cluster part of the cluster file. This shape is fixed:
//
//	cluster: demo
//	shards: 64                 # logical shards 0..63 (at most 8192)
//	epoch_ms: 1314220021721    # optional, default Instagram's; fixed once initialised
//	catalog: postgres://postgres@127.0.0.1:5433/shardid_catalog
//	migrations: ./migrations   # optional: the shards' migrations, relative to this file
//	hosts:
//	  - name: pg1
//	    dsn: postgres://postgres@127.0.0.1:5433/app
//	    app_dsn: postgres://app@127.0.0.1:6432/app   # optional: the router's (a pooler)
//
// ${VAR} in the catalog and host DSNs is replaced by the environment
// variable VAR when the file is loaded; the PG* variables (PGPASSWORD, ...)
// keep working because pgx reads them when it connects.
//
// The file may also hold serve's sections, segments: and snowflake:; they
// are accepted here and read by serve (internal/app/serveconfig), so that
// the router's package links neither id service.
type Config struct {
	Cluster string `yaml:"cluster"`
	Shards  int    `yaml:"shards"`
	// EpochMS is the id epoch in milliseconds since the Unix epoch. Zero
	// means Instagram's (1314220021721) for a new cluster, and whatever the
	// catalog holds for an initialised one.
	EpochMS int64  `yaml:"epoch_ms"`
	Catalog string `yaml:"catalog"`
	Hosts   []Host `yaml:"hosts"`
	// Migrations is the directory of the shards' tern migrations, relative
	// to the cluster file's own directory (see MigrationsDir); commands
	// that need it use it when not told another. Empty: none named.
	Migrations string `yaml:"migrations"`
	// Generator is the form of the shards' next_id(): auto (empty means
	// auto), plpgsql or c (sql.Params.Generator). auto installs the
	// shardid extension's C generator in a host database where the
	// extension is created and the host's role is a superuser, the
	// PL/pgSQL generator elsewhere; c makes init create the extension on
	// every host (the server must offer it: make ext) and fails where it
	// cannot; plpgsql never uses it. Changing it and running init
	// switches the installed shards; ids stay unique
	// (docs/uniqueness.md#the-c-generator).
	Generator string `yaml:"generator"`

	// Path is the file the configuration was loaded from, for messages.
	Path string `yaml:"-"`
}

// MigrationsDir is the migrations directory the cluster file names,
// resolved against the file's own directory when relative (so that a
// command run from elsewhere finds the same one); "" when it names none.
func (c *Config) MigrationsDir() string {
	if c.Migrations == "" || filepath.IsAbs(c.Migrations) {
		return c.Migrations
	}
	return filepath.Join(filepath.Dir(c.Path), c.Migrations)
}

// Host is one physical PostgreSQL database that holds logical shards.
type Host struct {
	Name string `yaml:"name"`
	// DSN is the operators' way to the host's database: every command
	// uses it (and the catalog records it), never AppDSN. It must reach
	// PostgreSQL itself, not a connection pooler.
	DSN string `yaml:"dsn"`
	// AppDSN is the applications' way to the same database, which the
	// Router uses instead of the catalog's DSN: typically a connection
	// pooler (docs/poolers.md). Empty means the catalog's DSN. The
	// router checks that it reaches the database the catalog names for
	// the host, and refuses the host's shards when it does not.
	AppDSN string `yaml:"app_dsn"`
	// Drain marks a host whose shards should move elsewhere.
	Drain bool `yaml:"drain"`

	// rawDSN is the DSN as written, before ${VAR} expansion: what the
	// catalog records, without its password (CatalogDSN).
	rawDSN string
}

// RawDSN is the DSN as written in the file, before ${VAR} expansion.
func (h Host) RawDSN() string {
	if h.rawDSN == "" {
		return h.DSN
	}
	return h.rawDSN
}

// CatalogDSN is what the catalog records for the host: the DSN as written
// (${VAR}s unexpanded) without its password, which every role that may
// read the catalog (a router's) would otherwise see. Connections take the
// password from the cluster file (Open), or from PGPASSWORD or a passfile
// (OpenCatalog), as libpq does.
func (h Host) CatalogDSN() string { return pg.StripPassword(h.RawDSN()) }

// notFound is the error for a cluster file that does not exist: "PATH not
// found", wrapping fs.ErrNotExist.
type notFound string

func (p notFound) Error() string { return string(p) + " not found" }
func (p notFound) Unwrap() error { return fs.ErrNotExist }

// MaxConfigSize is the largest cluster file LoadConfig reads: 1 MiB. A
// real one is a few kilobytes; anything larger (or a device such as
// /dev/zero) is refused before it is read into memory.
const MaxConfigSize = 1 << 20

// LoadConfig reads and parses the cluster file at path, expanding ${VAR}
// in DSNs from the process environment. It checks syntax and unknown keys
// only; commands that manage the cluster call ValidateCluster. A file
// larger than MaxConfigSize is an error.
func LoadConfig(path string) (*Config, error) {
	data, err := limits.ReadLimited(path, MaxConfigSize)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrConfig, notFound(path))
		}
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return ParseConfig(data, path, os.LookupEnv)
}

// maxEchoed is how much of a piece of input an error message repeats.
const maxEchoed = 80

// quoteInput quotes a piece of the user's input for an error message,
// cut to its first maxEchoed bytes: a name of 50 MB must not come back
// whole in the error about it.
func quoteInput(s string) string {
	if len(s) <= maxEchoed {
		return strconv.Quote(s)
	}
	cut := maxEchoed
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// ParseConfig parses a cluster file held in data; name is used in
// messages and lookup resolves ${VAR} in DSNs (os.LookupEnv in commands).
// Unknown keys are errors naming the key and its line.
func ParseConfig(data []byte, name string, lookup func(string) (string, bool)) (*Config, error) {
	// serve's sections are someone else's to read: kept as nodes here.
	var file struct {
		Config    `yaml:",inline"`
		Segments  yaml.Node `yaml:"segments"`
		Snowflake yaml.Node `yaml:"snowflake"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&file)
	cfg := &file.Config
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: %s", ErrConfig, name, yamlMessage(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%w: %s: more than one YAML document", ErrConfig, name)
	}
	cfg.Path = name
	var missing []string
	var structure error
	expand := func(field, s string) string {
		out, m, err := expandEnv(s, lookup)
		missing = append(missing, m...)
		if err != nil && structure == nil {
			structure = fmt.Errorf("%w: %s: %s: %v", ErrConfig, name, field, err)
		}
		return out
	}
	cfg.Catalog = expand("catalog", cfg.Catalog)
	for i := range cfg.Hosts {
		h := &cfg.Hosts[i]
		h.rawDSN = h.DSN
		h.DSN = expand(fmt.Sprintf("hosts[%d].dsn", i), h.DSN)
		h.AppDSN = expand(fmt.Sprintf("hosts[%d].app_dsn", i), h.AppDSN)
	}
	if structure != nil {
		return nil, structure
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s: environment variable %s not set", ErrConfig, name, strings.Join(dedupe(missing), ", "))
	}
	return cfg, nil
}

// expandEnv is envvar.ExpandDSN: the cluster file (ParseConfig) and the
// router (DSNs from the catalog) expand DSNs with it, each ${VAR}'s value
// taken literally (a password with '@' stays the password).
func expandEnv(s string, lookup func(string) (string, bool)) (string, []string, error) {
	return envvar.ExpandDSN(s, lookup)
}

// unknownField is yaml.v3's message for a key the type lacks; the type
// is a name (shardmgr.Host) or, for the file's top level, a struct's
// whole text with spaces in it.
var unknownField = regexp.MustCompile(`^line (\d+): field (\S+) not found in type (.+)$`)

// knownKeys lists the keys of the YAML mapping a decoder's type is: the
// file's top level (ParseConfig's struct, spelled out) or a host.
func knownKeys(typ string) []string {
	var keys []string
	add := func(t reflect.Type) {
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
				keys = append(keys, name)
			}
		}
	}
	switch {
	case strings.HasPrefix(typ, "struct {"):
		add(reflect.TypeFor[Config]())
		keys = append(keys, "segments", "snowflake")
	case typ == "shardmgr.Host":
		add(reflect.TypeFor[Host]())
	default:
		return nil
	}
	slices.Sort(keys)
	return keys
}

// yamlMessage turns the decoder's errors into one line:
// "line 4: unknown key \"shard\"".
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			if m := unknownField.FindStringSubmatch(e); m != nil {
				msgs[i] = fmt.Sprintf("line %s: unknown key %s", m[1], quoteInput(m[2]))
				if keys := knownKeys(m[3]); keys != nil {
					msgs[i] += " (known keys: " + strings.Join(keys, ", ") + ")"
				}
			} else {
				msgs[i] = e
			}
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

var (
	clusterName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
	hostName    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)
)

// ValidateCluster checks the cluster part of the file (cluster, shards,
// epoch_ms, catalog, hosts) and reports every problem in one error
// wrapping ErrConfig.
func (c *Config) ValidateCluster() error {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if c.Cluster == "" {
		add("cluster: missing (a name for the cluster)")
	} else if !clusterName.MatchString(c.Cluster) {
		add("cluster: %s must be 1-63 of A-Z a-z 0-9 _ . -", quoteInput(c.Cluster))
	}
	switch {
	case c.Shards == 0:
		add("shards: missing (the number of logical shards, 1..%d)", MaxShards)
	case c.Shards < 1 || c.Shards > MaxShards:
		add("shards: %d is impossible (1..%d)", c.Shards, MaxShards)
	}
	// Zero is the default epoch; any other value follows the rule every
	// epoch follows (sql function --epoch too).
	var ee *shsql.EpochError
	if err := shsql.CheckEpoch(c.EpochMS, 63-shsql.DefaultShardBits-shsql.DefaultSeqBits, time.Now()); c.EpochMS != 0 && errors.As(err, &ee) {
		add("epoch_ms: %d %s", c.EpochMS, ee.Reason)
	}
	switch c.Generator {
	case "", shsql.GeneratorAuto, shsql.GeneratorPLpgSQL, shsql.GeneratorC:
	default:
		add("generator: %s must be auto, plpgsql or c", quoteInput(c.Generator))
	}
	if c.Catalog == "" {
		add("catalog: missing (the DSN of the catalog database)")
	} else if err := pgsession.CheckScheme(c.Catalog); err != nil {
		add("catalog: %s", err)
	} else if _, err := pgconn.ParseConfig(c.Catalog); err != nil {
		add("catalog: %s", dsnError(err))
	}
	if len(c.Hosts) == 0 {
		add("hosts: at least one host is needed")
	}
	names := map[string]int{}
	dsns := map[string]int{}
	for i, h := range c.Hosts {
		switch {
		case h.Name == "":
			add("hosts[%d].name: missing", i)
		case !hostName.MatchString(h.Name):
			add("hosts[%d].name: %s must be 1-63 of A-Z a-z 0-9 _ . -", i, quoteInput(h.Name))
		default:
			if j, dup := names[h.Name]; dup {
				add("hosts[%d].name: duplicate host name %q (also hosts[%d])", i, h.Name, j)
			} else {
				names[h.Name] = i
			}
		}
		if h.DSN == "" {
			add("hosts[%d].dsn: missing", i)
			continue
		}
		if err := pgsession.CheckScheme(h.DSN); err != nil {
			add("hosts[%d].dsn: %s", i, err)
			continue
		}
		if h.AppDSN != "" {
			if _, err := pgconn.ParseConfig(h.AppDSN); err != nil {
				add("hosts[%d].app_dsn: %s", i, dsnError(err))
			}
		}
		key, err := pg.DatabaseKey(h.DSN)
		if err != nil {
			add("hosts[%d].dsn: %s", i, dsnError(err))
			continue
		}
		if j, dup := dsns[key]; dup {
			add("hosts[%d].dsn: duplicate DSN, same database as hosts[%d] (%s)", i, j, key)
		} else {
			dsns[key] = i
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrConfig, c.Path, strings.Join(probs, "; "))
	}
	return nil
}

// CheckShard returns an error wrapping ErrUnknownShard unless id is one of
// the cluster's logical shards, 0..Shards-1.
func (c *Config) CheckShard(id int) error {
	if id < 0 || id >= c.Shards {
		return fmt.Errorf("%w: %d (the cluster has shards 0..%d)", ErrUnknownShard, id, c.Shards-1)
	}
	return nil
}

// Host returns the host called name.
func (c *Config) Host(name string) (Host, bool) {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// dsnError keeps a DSN parse error on one line without repeating the DSN,
// which may carry a password.
func dsnError(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if inner := pe.Unwrap(); inner != nil {
			return "cannot parse DSN: " + inner.Error()
		}
	}
	return "cannot parse DSN: " + err.Error()
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
