package install

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
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

// checkGenerators looks, before init changes anything, at what each host's
// server offers for the cluster file's generator: generator c on a server
// that does not offer the extension, or through a role that is not a
// superuser, is ErrNoCGenerator; auto on a server that does not offer the
// extension (a major it is not built for: ext/shardid needs that major's
// server headers) installs PL/pgSQL, and the warning says why. A host's
// database that does not exist yet is read through the server's postgres
// database: both facts are the server's.
func checkGenerators(ctx context.Context, c *cluster.Cluster) ([]string, error) {
	cfg := c.Config()
	if cfg.Generator == shsql.GeneratorPLpgSQL {
		return nil, nil
	}
	var warnings []string
	for _, h := range cfg.Hosts {
		available, superuser, version, err := serverOffersExtension(ctx, c, h.Name)
		if err != nil {
			return nil, fmt.Errorf("host %s: look for the shardid extension: %w", h.Name, err)
		}
		switch {
		case cfg.Generator == shsql.GeneratorC && !superuser:
			return nil, fmt.Errorf("host %s: %w: the host's role is not a superuser, who alone may create the extension and declare C functions", h.Name, ErrNoCGenerator)
		case cfg.Generator == shsql.GeneratorC && !available:
			return nil, fmt.Errorf("host %s: %w: its server (PostgreSQL %s) does not offer the shardid extension %s (pg_available_extension_versions; it is built per major, with that major's server headers)", h.Name, ErrNoCGenerator, version, shsql.ExtensionVersion)
		case !available:
			warnings = append(warnings, fmt.Sprintf("host %s: generator auto installs the PL/pgSQL generator: its server (PostgreSQL %s) does not offer the shardid extension %s", h.Name, version, shsql.ExtensionVersion))
		}
	}
	return warnings, nil
}

// serverOffersExtension reads, through the host's pool (its connection
// budget), whether its server offers the shardid extension at this
// release's version, whether the host's role is a superuser, and the
// server's version; a host database that does not exist yet is read
// through the server's postgres database, as init would create it.
func serverOffersExtension(ctx context.Context, c *cluster.Cluster, host string) (available, superuser bool, version string, err error) {
	const q = `SELECT
			EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions WHERE name = $1 AND version = $2),
			(SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user),
			current_setting('server_version')`
	conn, err := acquire(ctx, c, host)
	if err == nil {
		defer conn.Release()
		err = conn.QueryRow(ctx, q, shsql.ExtensionName, shsql.ExtensionVersion).Scan(&available, &superuser, &version)
		return available, superuser, version, err
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.InvalidCatalogName {
		return false, false, "", err
	}
	cc, err := c.HostConnConfig(host, cluster.Session{})
	if err != nil {
		return false, false, "", err
	}
	cc.Database = "postgres"
	pc, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, false, "", pg.ServerFirst(err)
	}
	defer pc.Close(context.WithoutCancel(ctx))
	err = pc.QueryRow(ctx, q, shsql.ExtensionName, shsql.ExtensionVersion).Scan(&available, &superuser, &version)
	return available, superuser, version, err
}
