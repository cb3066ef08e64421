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

var templates = template.Must(template.ParseFS(templateFS, "templates/*.sql.tmpl"))

// data is what the templates see: Params with defaults applied plus the
// numbers derived from the layout.
type data struct {
	Params
	Version         int
	LockClass       int64
	AdvanceSQLState string
	AdvanceMarginMS int64
	TimeShift       int    // ShardBits + SeqBits: where the time starts
	SeqMod          int64  // 1 << SeqBits
	SeqMask         int64  // SeqMod - 1
	ShardMask       int64  // (1 << ShardBits) - 1
	CounterMax      int64  // (1 << (TimeBits + SeqBits)) - 1
	LagFloor        int64  // Epoch + LagMS
	ShardBitString  string // the shard id as ShardBits binary digits
	CounterBits     int    // usable time bits + SeqBits: the counter as a bit string
	OverlayAt       int    // where the shard bits go into it (1-based, from the top)
	CustomClock     bool
	Marker          string
}

// Render returns the SQL that installs the generator described by p (and the
// id-reading helpers) into its schema. The SQL runs on a bare database with
// psql and may be run again at will: it never resets the counter.
func Render(p Params) (string, error) {
	custom := p.Clock != ""
	p, err := p.withDefaults()
	if err != nil {
		return "", err
	}
	marker, _ := Marker(p)
	d := data{
		Params:          p,
		Version:         Version,
		LockClass:       LockClass,
		AdvanceSQLState: AdvanceSQLState,
		AdvanceMarginMS: AdvanceMarginMS,
		TimeShift:       p.ShardBits + p.SeqBits,
		SeqMod:          1 << p.SeqBits,
		SeqMask:         1<<p.SeqBits - 1,
		ShardMask:       1<<p.ShardBits - 1,
		CounterMax:      1<<(p.UsableTimeBits()+p.SeqBits) - 1,
		LagFloor:        p.Epoch + int64(p.LagMS),
		ShardBitString:  fmt.Sprintf("%0*b", p.ShardBits, p.Shard),
		CounterBits:     p.UsableTimeBits() + p.SeqBits,
		OverlayAt:       p.UsableTimeBits() + 1,
		CustomClock:     custom,
		Marker:          strings.ReplaceAll(marker, "'", "''"),
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
