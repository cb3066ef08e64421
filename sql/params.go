package sql

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Variants of the generator.
const (
	// Safe is the default generator: a 51-bit counter in a CACHE 1
	// sequence, pulled up to the clock under an advisory-lock fence. It never
	// returns the same id twice (docs/uniqueness.md).
	Safe = "safe"
	// Instagram is the function exactly as Instagram published it in 2012.
	// It repeats ids above 1024 ids per millisecond per shard, when the clock
	// steps back, and when its sequence is reset. Kept for compatibility and
	// comparison.
	Instagram = "instagram"
)

// Object names inside a shard schema.
const (
	FunctionName     = "next_id"         // the generator: <schema>.next_id()
	CounterName      = "next_id_counter" // the safe generator's counter sequence
	PullUpName       = "next_id_pull_up" // the safe generator's fenced pull-up
	AdvanceName      = "next_id_advance" // the safe generator's owner-only floor: next_id_advance(min_id, force)
	InstagramSeqName = "table_id_seq"    // the instagram variant's sequence
	// FenceFuncName is the fence's trigger function, <schema>.shardid_fence(),
	// which the shard manager writes during a move (its package fence).
	FenceFuncName = "shardid_fence"
)

// LockClass is the first key of the advisory locks that fence the safe
// generator's counter (the second key is the shard id): 'shid'.
const LockClass = 0x73686964

// AdvanceSQLState is the SQLSTATE next_id_advance raises when it refuses a
// floor the clock would not reach within AdvanceMarginMS (pass force => true
// to move the counter that far anyway).
const AdvanceSQLState = "SIDAD"

// AdvanceMarginMS is how far ahead of the server's clock next_id_advance
// may put the counter without force: one hour. No generator of a cluster
// hands out an id whose time lies further ahead of its host's clock unless
// someone forced an advance (docs/uniqueness.md#forged-ids).
const AdvanceMarginMS = 3_600_000

// AdvanceLimitMS is how far ahead of the server's clock next_id_advance
// puts the counter at most, forced or not: ten years. A floor beyond it
// (or within AdvanceReserveMS of the counter's maximum) is refused with
// AdvanceLimitSQLState: taking the counter there would leave the shard
// without ids, for good or for years, and no id a generator handed out
// lies that far ahead (docs/uniqueness.md#the-advances-limit).
const AdvanceLimitMS = 10 * 365 * 24 * 3_600_000

// AdvanceReserveMS is how much of the counter's range next_id_advance
// always leaves above the floor it sets, forced or not: a day of ids at
// the full rate. It binds only when the layout ends within
// AdvanceLimitMS of the clock.
const AdvanceReserveMS = 24 * 3_600_000

// AdvanceLimitSQLState is the SQLSTATE next_id_advance raises, forced or
// not, for a floor beyond AdvanceLimitMS or within AdvanceReserveMS of the
// counter's maximum.
const AdvanceLimitSQLState = "SIDAL"

// OwnerSQLState is the SQLSTATE the install SQL raises when an object it
// would create or replace in the shard's schema (generator, counter,
// helpers, fence function) already exists and is owned by a role other
// than the one running it (docs/uniqueness.md#owners).
const OwnerSQLState = "SIDOW"

// OwnedObjects are the functions of a shard's schema that the toolkit
// relies on, by name (any argument list): the install SQL refuses to run
// when one of them belongs to another role, and verify reports it. The
// fence's trigger function is among them: a role that owned it could
// swap in a body that lets every write through.
var OwnedObjects = []string{FunctionName, PullUpName, AdvanceName, "id_time", "id_shard", "id_seq", FenceFuncName}

// OwnedSequences are the sequences of a shard's schema that the toolkit
// relies on (either variant's counter), checked as OwnedObjects are.
var OwnedSequences = []string{CounterName, InstagramSeqName}

// Layout defaults: Instagram's.
const (
	DefaultEpoch     = 1314220021721
	DefaultTimeBits  = 41
	DefaultShardBits = 13
	DefaultSeqBits   = 10
)

// Params describe one shard's generator. Zero values mean the defaults:
// schema shard_NNNN, variant safe, Instagram's epoch and 41/13/10 layout.
type Params struct {
	Shard     int
	Schema    string
	Variant   string
	Epoch     int64 // milliseconds since the Unix epoch
	TimeBits  int
	ShardBits int
	SeqBits   int
	// LagMS is how far (in ms) the safe generator's counter may fall behind
	// the clock before a call pulls it up. Zero means 1.
	LagMS int
	// Clock is the SQL expression for "now" in ms since the Unix epoch.
	// Empty means the server's clock_timestamp(); tests substitute a
	// controllable clock. The C generator takes only the form
	// "schema.function()" (a function it calls for the clock, through
	// the superuser-only setting shardid.test_clock).
	Clock string
	// Generator is the form of the safe variant's next_id(): GeneratorAuto
	// (the zero value), GeneratorPLpgSQL or GeneratorC. The form is chosen
	// when the SQL runs, on the server: auto takes C where the shardid
	// extension (ExtensionVersion) is installed in the database and the
	// role running the SQL is a superuser, PL/pgSQL otherwise.
	Generator string
}

// Forms of the safe generator's next_id() (Params.Generator). Both use
// the same counter, layout and marker; switching between them keeps every
// id unique (docs/uniqueness.md#the-c-generator).
const (
	// GeneratorAuto is C where it can be installed, PL/pgSQL elsewhere.
	GeneratorAuto = "auto"
	// GeneratorPLpgSQL is the inlined SQL expression with its advisory-lock
	// fence: works on every PostgreSQL, managed ones included.
	GeneratorPLpgSQL = "plpgsql"
	// GeneratorC is the shardid extension's lock-free C function (ext/shardid).
	GeneratorC = "c"
)

// The shardid extension the C generator needs (ext/shardid): its name, the
// version this release installs and requires, and its schema.
const (
	ExtensionName    = "shardid"
	ExtensionVersion = "1.0"
	ExtensionSchema  = "shardid_ext"
)

// GeneratorSQLState is the SQLSTATE the install SQL raises when
// GeneratorC was asked for where it cannot be installed (no extension in
// the database, or a role that is not a superuser).
const GeneratorSQLState = "SIDGC"

// ErrGenerator is a Params.Generator that is none of the three forms.
var ErrGenerator = errors.New("unknown generator (want auto, plpgsql or c)")

// serverClock is the generator's clock, Params.Clock's default: the
// server's clock_timestamp(), which no session can set.
const serverClock = "pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint"

// clockFunctionRE is the clock the C generator can take: a function name.
var clockFunctionRE = regexp.MustCompile(`^([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)\(\)$`)

// UsableTimeBits is how many time bits an id can really use: bit 63 always
// stays 0, so a layout whose widths add up to 64 (Instagram's 41/13/10) keeps
// the top time bit 0 too.
func (p Params) UsableTimeBits() int { return 63 - p.ShardBits - p.SeqBits }

// DefaultSchema is the schema of logical shard n: shard_0005 for 5.
func DefaultSchema(shard int) string { return fmt.Sprintf("shard_%04d", shard) }

// Version of the generator objects; the marker comment carries it so that
// a later release can tell what it upgrades. Any change to the objects or
// their privileges is a new version, so that init and migrate generator
// bring every shard to it: v1 (the first releases; the earliest let
// PUBLIC execute next_id_advance(bigint)); v2 (next_id_advance is the owner's only,
// refuses a floor beyond AdvanceLimitMS forced or not; the install SQL
// refuses objects owned by another role); v3 (the pull-up and the advance
// skip the catalog query for the extension's forward-only raise where no
// schema of the extension's name exists: the same choice, without the
// query that cost about two thirds of a pull-up that raises the counter).
const Version = 3

var (
	ErrVariant = errors.New("unknown generator variant (want safe or instagram)")
	ErrLayout  = errors.New("invalid layout")
	ErrSchema  = errors.New("invalid schema name")
)

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// EpochError is an epoch that CheckEpoch refuses. It wraps ErrLayout.
type EpochError struct {
	Epoch  int64
	Reason string // "is in the future (...)", "is negative", ...
}

func (e *EpochError) Error() string {
	return fmt.Sprintf("%v: epoch %d %s", ErrLayout, e.Epoch, e.Reason)
}

func (e *EpochError) Unwrap() error { return ErrLayout }

// CheckEpoch is the rule for every epoch shardid takes (the cluster file's
// epoch_ms, sql function --epoch, Params): not negative; not after now,
// since a generator whose epoch is ahead of the clock counts from zero and
// hands out ids such as 5121, 5122 that carry no time; and leaving room
// for ids with usableTimeBits time bits, as idgen.Layout requires (id
// encode): the last millisecond they can hold fits in an int64. A failure
// is an *EpochError.
func CheckEpoch(epoch int64, usableTimeBits int, now time.Time) error {
	nowMS := now.UnixMilli()
	switch {
	case epoch < 0:
		return &EpochError{epoch, "is negative"}
	case epoch > nowMS:
		return &EpochError{epoch, fmt.Sprintf("is in the future (%s; the clock says %s)", msTime(epoch), msTime(nowMS))}
	case usableTimeBits < 1 || usableTimeBits > 62:
		return nil // the widths are checked on their own
	}
	span := int64(1)<<usableTimeBits - 1
	if epoch > math.MaxInt64-span {
		return &EpochError{epoch, fmt.Sprintf("leaves no room for %d time bits in an int64 of milliseconds", usableTimeBits)}
	}
	return nil
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// CheckSchema is the rule for a generator's schema name: a plain
// lower-case identifier (so it needs no quoting anywhere), and not one of
// PostgreSQL's own schemas (pg_catalog, pg_toast, any pg_ name,
// information_schema), where CREATE SCHEMA IF NOT EXISTS would succeed and
// the generator would land among the system's objects.
func CheckSchema(schema string) error {
	if len(schema) > 63 {
		// Not echoed: it may be megabytes long.
		return fmt.Errorf("%w: %d bytes long (lower-case letters, digits and _, at most 63)", ErrSchema, len(schema))
	}
	if !schemaRE.MatchString(schema) {
		return fmt.Errorf("%w: %q (lower-case letters, digits and _, at most 63)", ErrSchema, schema)
	}
	if strings.HasPrefix(schema, "pg_") || schema == "information_schema" {
		return fmt.Errorf("%w: %q is reserved for PostgreSQL's own objects", ErrSchema, schema)
	}
	return nil
}

// withDefaults fills zero values and validates.
func (p Params) withDefaults() (Params, error) {
	if p.Variant == "" {
		p.Variant = Safe
	}
	if p.Variant != Safe && p.Variant != Instagram {
		return p, fmt.Errorf("%w: %q", ErrVariant, p.Variant)
	}
	switch p.Generator {
	case "":
		p.Generator = GeneratorAuto
	case GeneratorAuto, GeneratorPLpgSQL, GeneratorC:
	default:
		return p, fmt.Errorf("%w: %q", ErrGenerator, p.Generator)
	}
	if p.Clock != "" && p.Clock != serverClock && !clockFunctionRE.MatchString(p.Clock) {
		// A test clock the C generator cannot call: PL/pgSQL's alone.
		if p.Generator == GeneratorC && p.Variant == Safe {
			return p, fmt.Errorf("%w: the C generator's clock must be a function, schema.name(), not %q", ErrGenerator, p.Clock)
		}
		p.Generator = GeneratorPLpgSQL
	}
	if p.TimeBits == 0 && p.ShardBits == 0 && p.SeqBits == 0 {
		p.TimeBits, p.ShardBits, p.SeqBits = DefaultTimeBits, DefaultShardBits, DefaultSeqBits
	}
	if p.Epoch == 0 {
		p.Epoch = DefaultEpoch
	}
	if p.LagMS == 0 {
		p.LagMS = 1
	}
	// Bound each width before adding them, so huge values cannot wrap the sum.
	if sum := p.TimeBits + p.ShardBits + p.SeqBits; p.TimeBits < 2 || p.ShardBits < 1 || p.SeqBits < 1 ||
		p.TimeBits > 64 || p.ShardBits > 64 || p.SeqBits > 64 || (sum != 63 && sum != 64) {
		return p, fmt.Errorf("%w: widths %d/%d/%d must be positive and add up to 63 or 64 (bit 63 stays 0)", ErrLayout, p.TimeBits, p.ShardBits, p.SeqBits)
	}
	if err := CheckEpoch(p.Epoch, p.UsableTimeBits(), time.Now()); err != nil {
		return p, err
	}
	if p.Shard < 0 || p.Shard >= 1<<p.ShardBits {
		return p, fmt.Errorf("%w: shard %d out of range 0..%d", ErrLayout, p.Shard, 1<<p.ShardBits-1)
	}
	if p.Shard > math.MaxInt32 {
		// The layout holds it, but pg_advisory_lock(int4, int4) keys the
		// generator's lock by the shard, and the catalog stores it as an integer.
		return p, fmt.Errorf("%w: shard %d is above %d, the largest an advisory lock key (int4) takes", ErrLayout, p.Shard, math.MaxInt32)
	}
	if p.LagMS < 0 {
		return p, fmt.Errorf("%w: negative lag %d", ErrLayout, p.LagMS)
	}
	if p.Schema == "" {
		p.Schema = DefaultSchema(p.Shard)
	}
	if err := CheckSchema(p.Schema); err != nil {
		return p, err
	}
	if p.Clock == "" {
		p.Clock = serverClock
	}
	return p, nil
}

// Marker is the comment installed on the generator function. verify reads it
// back with ParseMarker to learn the variant, shard and layout installed.
func Marker(p Params) (string, error) {
	p, err := p.withDefaults()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("shardid generator v%d variant=%s shard=%d epoch=%d layout=%d/%d/%d",
		Version, p.Variant, p.Shard, p.Epoch, p.TimeBits, p.ShardBits, p.SeqBits), nil
}

var markerRE = regexp.MustCompile(`^shardid generator v(\d+) variant=(\w+) shard=(\d+) epoch=(\d+) layout=(\d+)/(\d+)/(\d+)$`)

// ParseMarker reads a marker comment back. Version is the generator version
// that wrote it.
func ParseMarker(s string) (p Params, version int, err error) {
	m := markerRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return p, 0, fmt.Errorf("not a shardid generator marker: %q", s)
	}
	n := make([]int64, len(m))
	for i := range m {
		if i == 0 || i == 2 {
			continue
		}
		n[i], _ = strconv.ParseInt(m[i], 10, 64)
	}
	p = Params{Variant: m[2], Shard: int(n[3]), Epoch: n[4], TimeBits: int(n[5]), ShardBits: int(n[6]), SeqBits: int(n[7])}
	return p, int(n[1]), nil
}
