package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// FuncName is schema's fence function, quoted and schema-qualified.
func FuncName(schema string) string { return pgx.Identifier{schema, fenceTrigger}.Sanitize() }

// Opened reports whether schema's fence function exists with the open body
// (Func with raise false): a copy whose fence was opened for writes. A
// schema or function that does not exist is not opened.
func Opened(ctx context.Context, q pg.Querier, schema string) (bool, error) {
	var src string
	err := q.QueryRow(ctx, `SELECT p.prosrc FROM pg_catalog.pg_proc p
		JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND p.proname = $2 AND p.pronargs = 0`, schema, fenceTrigger).Scan(&src)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fence %s: %w", schema, err)
	}
	// The raising body is the only one that raises.
	return !strings.Contains(strings.ToUpper(src), "RAISE"), nil
}
