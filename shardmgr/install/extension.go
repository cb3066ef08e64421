package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	shsql "github.com/shardid/shardid/sql"
)

// ErrNoCGenerator is init's error for a host where the cluster file asks
// for the C generator (generator: c) and it cannot be installed: the
// server does not offer the shardid extension at this release's version
// (pg_available_extension_versions), or the host's role is not a
// superuser, who alone may create it and declare C functions.
var ErrNoCGenerator = errors.New("the C generator cannot be installed")

// ensureExtension creates the shardid extension in the host's database
// when the cluster file asks for the C generator (generator: c), the
// server offers it at this release's version and the host's role is a
// superuser; where it cannot, that is ErrNoCGenerator. auto and plpgsql
// leave the database alone: auto installs the C generator where a DBA
// created the extension (CREATE EXTENSION shardid), the PL/pgSQL one
// elsewhere (sql.Params.Generator); docs/uniqueness.md#the-c-generator
// says why creating it is not automatic.
func ensureExtension(ctx context.Context, pool *pgxpool.Pool, generator string) error {
	if generator != shsql.GeneratorC {
		return nil
	}
	var available, superuser bool
	var installed *string
	err := pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions WHERE name = $1 AND version = $2),
			(SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),
			(SELECT extversion FROM pg_catalog.pg_extension WHERE extname = $1)`,
		shsql.ExtensionName, shsql.ExtensionVersion).Scan(&available, &superuser, &installed)
	if err != nil {
		return fmt.Errorf("look for the shardid extension: %w", err)
	}
	switch {
	case !superuser:
		return fmt.Errorf("%w: the host's role is not a superuser, who alone may create the extension and declare C functions", ErrNoCGenerator)
	case installed != nil && *installed == shsql.ExtensionVersion:
		return nil
	case !available:
		return fmt.Errorf("%w: the server does not offer the shardid extension %s (pg_available_extension_versions)", ErrNoCGenerator, shsql.ExtensionVersion)
	case installed != nil:
		_, err = pool.Exec(ctx, "ALTER EXTENSION "+pgx.Identifier{shsql.ExtensionName}.Sanitize()+" UPDATE TO '"+shsql.ExtensionVersion+"'")
	default:
		_, err = pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+pgx.Identifier{shsql.ExtensionName}.Sanitize()+" VERSION '"+shsql.ExtensionVersion+"'")
	}
	if err != nil {
		return fmt.Errorf("install the shardid extension %s: %w", shsql.ExtensionVersion, err)
	}
	return nil
}
