package sql

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed templates/*.sql.tmpl
var templateFS embed.FS

var templates = template.Must(template.New("sql").Funcs(template.FuncMap{
	"extName":    func() string { return ExtensionName },
	"extVersion": func() string { return ExtensionVersion },
	"extSchema":  func() string { return ExtensionSchema },
	// raiseArgs hands the "raise" template the data and the PL/pgSQL
	// variable holding the target.
	"raiseArgs": func(d data, target string) raiseArgs { return raiseArgs{D: d, Target: target} },
}).ParseFS(templateFS, "templates/*.sql.tmpl"))

type raiseArgs struct {
	D      data
	Target string
}

// data is what the templates see: Params with defaults applied plus the
// numbers derived from the layout.
type data struct {
	Params
	Version         int
	LockClass       int64
	AdvanceSQLState string
	AdvanceMarginMS int64
	// The advance's hard limit and the owner check (owners.sql.tmpl).
	AdvanceLimitMS       int64
	AdvanceReserveMS     int64
	AdvanceLimitSQLState string
	OwnerSQLState        string
	OwnedFunctions       []string
	OwnedSequences       []string
	TimeShift            int    // ShardBits + SeqBits: where the time starts
	SeqMod               int64  // 1 << SeqBits
	SeqMask              int64  // SeqMod - 1
	ShardMask            int64  // (1 << ShardBits) - 1
	CounterMax           int64  // (1 << (TimeBits + SeqBits)) - 1
	LagFloor             int64  // Epoch + LagMS
	ShardBitString       string // the shard id as ShardBits binary digits
	CounterBits          int    // usable time bits + SeqBits: the counter as a bit string
	OverlayAt            int    // where the shard bits go into it (1-based, from the top)
	CustomClock          bool
	Marker               string
	GeneratorSQLState    string
	// ClockFunction is the C generator's test clock (shardid.test_clock),
	// from a custom Clock of the form schema.name().
	ClockFunction string
}

// Render returns the SQL that installs the generator described by p (and the
// id-reading helpers) into its schema, for a caller that runs it inside a
// transaction of its own (the shard manager runs it in one, with the
// simple protocol): it has no transaction control, and run statement by
// statement in autocommit it would let PUBLIC execute next_id_advance
// between its CREATE and its REVOKE. RenderScript is the form for psql. It
// may be run again at will: it never resets the counter. It refuses to
// create or replace anything in a schema where another role owns one of
// the toolkit's objects (OwnerSQLState).
func Render(p Params) (string, error) {
	custom := p.Clock != ""
	p, err := p.withDefaults()
	if err != nil {
		return "", err
	}
	marker, _ := Marker(p)
	d := data{
		Params:               p,
		Version:              Version,
		LockClass:            LockClass,
		AdvanceSQLState:      AdvanceSQLState,
		AdvanceMarginMS:      AdvanceMarginMS,
		AdvanceLimitMS:       AdvanceLimitMS,
		AdvanceReserveMS:     AdvanceReserveMS,
		AdvanceLimitSQLState: AdvanceLimitSQLState,
		OwnerSQLState:        OwnerSQLState,
		OwnedFunctions:       OwnedObjects,
		OwnedSequences:       OwnedSequences,
		TimeShift:            p.ShardBits + p.SeqBits,
		SeqMod:               1 << p.SeqBits,
		SeqMask:              1<<p.SeqBits - 1,
		ShardMask:            1<<p.ShardBits - 1,
		CounterMax:           1<<(p.UsableTimeBits()+p.SeqBits) - 1,
		LagFloor:             p.Epoch + int64(p.LagMS),
		ShardBitString:       fmt.Sprintf("%0*b", p.ShardBits, p.Shard),
		CounterBits:          p.UsableTimeBits() + p.SeqBits,
		OverlayAt:            p.UsableTimeBits() + 1,
		CustomClock:          custom,
		Marker:               strings.ReplaceAll(marker, "'", "''"),
		GeneratorSQLState:    GeneratorSQLState,
	}
	if m := clockFunctionRE.FindStringSubmatch(p.Clock); custom && m != nil {
		d.ClockFunction = m[1]
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, p.Variant+".sql.tmpl", d); err != nil {
		return "", fmt.Errorf("render %s generator for shard %d: %w", p.Variant, p.Shard, err)
	}
	if err := templates.ExecuteTemplate(&b, "helpers.sql.tmpl", d); err != nil {
		return "", fmt.Errorf("render id helpers for shard %d: %w", p.Shard, err)
	}
	return b.String(), nil
}

// RenderScript is Render's SQL as a script for psql: one transaction
// (BEGIN ... COMMIT), so that no other session ever sees the generator's
// functions before their privileges are set, and a failure part way
// leaves nothing behind (run it with -v ON_ERROR_STOP=1). Do not run it
// inside a transaction of your own: its COMMIT would end yours. Its IF
// [NOT] EXISTS statements would each tell psql "... skipping" as a NOTICE,
// on a fresh database as on a rerun: the script raises client_min_messages
// to warning for its own transaction only, so psql shows warnings and
// errors and nothing a DBA should not have to read.
func RenderScript(p Params) (string, error) {
	ddl, err := Render(p)
	if err != nil {
		return "", err
	}
	return "-- One transaction: nothing is visible to other sessions before the REVOKE below.\nBEGIN;\n" +
		"-- The IF [NOT] EXISTS below would each print a NOTICE \"... skipping\": expected, so not shown.\n" +
		"SET LOCAL client_min_messages = warning;\n" + ddl + "COMMIT;\n", nil
}
