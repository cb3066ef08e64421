package pgdatabase

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is a connection, pool or transaction that runs a query.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PublicCanConnect reports whether PUBLIC, and so every role of the
// server, may connect to database dbname: PostgreSQL grants CONNECT to
// PUBLIC on every new database. A database whose advisory locks shardid
// relies on (the catalog, the lease and segment databases) should be open
// only to the roles that need it, since any role that connects can take
// those locks and make shardid wait.
func PublicCanConnect(ctx context.Context, conn Querier, dbname string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT has_database_privilege('public', $1, 'CONNECT')`, dbname).Scan(&ok); err != nil {
		return false, fmt.Errorf("read the CONNECT privilege of database %s: %w", dbname, err)
	}
	return ok, nil
}
