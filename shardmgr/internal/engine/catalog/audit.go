package catalog

import (
	"context"
	"time"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// The console's audit log, shardid.console_audit (catalog migration 19),
// is written and read here only: a row when an action starts (its result
// AuditRunning) completed when it ends, or one complete row for a request
// refused before it started. The rows are not part of the map: writing
// them takes no lock and bumps no generation.

// AuditRunning is the result of an action that has not ended.
const AuditRunning = "running"

// AuditRow is one row of shardid.console_audit.
type AuditRow struct {
	ID     int64
	At     time.Time
	Who    string
	Action string
	// Params is the action's parameters as JSON (an object).
	Params []byte
	Result string
	// DurationMS is nil while the action runs.
	DurationMS *int64
	// DBRole is the database role that wrote the row.
	DBRole string
}

// InsertAudit writes a row and returns its id. took < 0 leaves the
// duration empty (an action that runs).
func InsertAudit(ctx context.Context, q pg.Querier, who, action string, params []byte, result string, took time.Duration) (int64, error) {
	var dur *int64
	if took >= 0 {
		ms := took.Milliseconds()
		dur = &ms
	}
	if len(params) == 0 {
		params = []byte("{}")
	}
	var id int64
	err := q.QueryRow(ctx, `INSERT INTO shardid.console_audit (who, action, params, result, duration_ms)
		VALUES ($1, $2, $3::jsonb, $4, $5) RETURNING id`, who, action, string(params), result, dur).Scan(&id)
	return id, err
}

// FinishAudit completes row id, written by InsertAudit while its action
// ran, with the action's result and duration. A row that is no longer
// running is left as it is.
func FinishAudit(ctx context.Context, q pg.Execer, id int64, result string, took time.Duration) error {
	_, err := q.Exec(ctx, `UPDATE shardid.console_audit SET result = $2, duration_ms = $3
		WHERE id = $1 AND result = $4`, id, result, took.Milliseconds(), AuditRunning)
	return err
}

// ReadAudit returns up to limit rows, newest first, whose ids are below
// before (0: from the newest).
func ReadAudit(ctx context.Context, q pg.Querier, limit int, before int64) ([]AuditRow, error) {
	rows, err := q.Query(ctx, `SELECT id, at, who, action, params::text, result, duration_ms, db_role
		FROM shardid.console_audit WHERE $2::bigint = 0 OR id < $2 ORDER BY id DESC LIMIT $1`, limit, before)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditRow
	for rows.Next() {
		var r AuditRow
		var params string
		if err := rows.Scan(&r.ID, &r.At, &r.Who, &r.Action, &params, &r.Result, &r.DurationMS, &r.DBRole); err != nil {
			return nil, err
		}
		r.Params = []byte(params)
		out = append(out, r)
	}
	return out, rows.Err()
}
