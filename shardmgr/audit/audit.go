package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/engine/catalog"
)

// Results other than an error line.
const (
	// ResultOK is an action that succeeded.
	ResultOK = "ok"
	// ResultRunning is an action that has not ended (or whose end could
	// not be recorded: the console stopped with it).
	ResultRunning = catalog.AuditRunning
)

// Timeout bounds each call on the catalog (the wait for a connection
// included): the audit log must not hold an action up for long.
const Timeout = 30 * time.Second

// MaxList is the most entries List returns at once.
const MaxList = 500

// Limits on what a row keeps; longer values are cut, marked with "…".
const (
	maxWho    = 200
	maxAction = 64
	maxResult = 4000
)

// ErrInput is wrapped by the errors of List's arguments.
var ErrInput = errors.New("invalid audit log request")

// Entry is one action taken through the console.
type Entry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Who    string    `json:"who"`
	Action string    `json:"action"`
	// Params are the action's parameters as it was asked (a JSON object).
	Params json.RawMessage `json:"params"`
	// Result is "ok", ResultRunning, or the error line.
	Result string `json:"result"`
	// DurationMS is how long the action took (0 for a request refused
	// before it ran); nil while it runs.
	DurationMS *int64 `json:"duration_ms"`
	// DBRole is the database role that wrote the row.
	DBRole string `json:"db_role"`
}

// ResultOf is the result an action's error gives: ResultOK for nil, else
// its error line.
func ResultOf(err error) string {
	if err == nil {
		return ResultOK
	}
	return err.Error()
}

// Begin records that who started action with params (marshalled as a
// JSON object) and returns the row's id, for Finish.
func Begin(ctx context.Context, c *cluster.Cluster, who, action string, params any) (int64, error) {
	return insert(ctx, c, who, action, params, ResultRunning, -1)
}

// Record records an action whose result is known at once (a request
// refused before the action ran; an action that ran but whose Begin was
// not recorded) and returns the row's id.
func Record(ctx context.Context, c *cluster.Cluster, who, action string, params any, result string, took time.Duration) (int64, error) {
	if took < 0 {
		took = 0
	}
	return insert(ctx, c, who, action, params, result, took)
}

// Finish records the end of the action Begin recorded as id: its result
// (ResultOf its error) and how long it took.
func Finish(ctx context.Context, c *cluster.Cluster, id int64, result string, took time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	pool, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if err := catalog.FinishAudit(ctx, pool, id, clip(result, maxResult), max(took, 0)); err != nil {
		return fmt.Errorf("audit log: record the end of entry %d: %w", id, err)
	}
	return nil
}

func insert(ctx context.Context, c *cluster.Cluster, who, action string, params any, result string, took time.Duration) (int64, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return 0, fmt.Errorf("audit log: parameters of %s: %w", action, err)
	}
	if params == nil || !strings.HasPrefix(string(p), "{") {
		p = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	pool, err := c.Catalog(ctx, shardmgr.UseWrite)
	if err != nil {
		return 0, fmt.Errorf("audit log: %w", err)
	}
	id, err := catalog.InsertAudit(ctx, pool, clip(who, maxWho), clip(action, maxAction), p, clip(result, maxResult), took)
	if err != nil {
		return 0, fmt.Errorf("audit log: record %s by %s: %w", action, who, err)
	}
	return id, nil
}

// List returns up to limit entries (1..MaxList), newest first, older than
// entry before (0: from the newest), and whether there are older ones.
func List(ctx context.Context, c *cluster.Cluster, limit int, before int64) (entries []Entry, more bool, err error) {
	if limit < 1 || limit > MaxList {
		return nil, false, fmt.Errorf("%w: limit %d: want 1 to %d", ErrInput, limit, MaxList)
	}
	if before < 0 {
		return nil, false, fmt.Errorf("%w: before %d: want an entry's id (or 0 for the newest)", ErrInput, before)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	pool, err := c.Catalog(ctx, shardmgr.UseRead)
	if err != nil {
		return nil, false, fmt.Errorf("audit log: %w", err)
	}
	rows, err := catalog.ReadAudit(ctx, pool, limit+1, before)
	if err != nil {
		return nil, false, fmt.Errorf("audit log: read shardid.console_audit: %w", err)
	}
	if len(rows) > limit {
		rows, more = rows[:limit], true
	}
	entries = make([]Entry, len(rows))
	for i, r := range rows {
		entries[i] = Entry{ID: r.ID, At: r.At.UTC(), Who: r.Who, Action: r.Action, Params: r.Params,
			Result: r.Result, DurationMS: r.DurationMS, DBRole: r.DBRole}
	}
	return entries, more, nil
}

// clip keeps s to n bytes at most (cut at a rune, marked with "…") and
// on one line: a header or an error with control characters in it would
// otherwise forge lines on a page or in a log.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
