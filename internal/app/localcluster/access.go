package localcluster

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/internal/app/serveconfig"
	"github.com/shardid/shardid/internal/pgdatabase"
	"github.com/shardid/shardid/internal/pgsession"
	"github.com/shardid/shardid/shardmgr"
)

// PostgreSQL grants CONNECT on a new database to PUBLIC, and init (for
// the catalog) and serve (for its segment sources and lease database) warn
// about it: any role that connects can hold the advisory locks they wait
// for. The local cluster's roles are the servers' superuser only, so local
// up makes those databases itself and revokes CONNECT from PUBLIC on them,
// and neither warns on the local cluster. A role made later (a routing
// role, docs/routing.md) is granted CONNECT by name. The hosts' databases
// are the application's and stay open to its roles (docs/shardmgr.md).

// closeDatabases creates the databases the cluster file at path names on
// these servers for the toolkit's coordination (the catalog, the segment
// sources, the lease database) when missing, and revokes CONNECT on them
// from PUBLIC where PUBLIC has it. Databases on other servers (a file
// edited to point elsewhere) are left alone. It returns what it changed,
// as "pg1/shardid_catalog (created, CONNECT revoked)".
func closeDatabases(ctx context.Context, path string, servers []Server) ([]string, error) {
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	dsns := []string{cfg.Catalog}
	sec, err := serveconfig.Load(path, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if sec.Segments != nil {
		dsns = append(dsns, sec.Segments.Sources...)
	}
	if sec.Snowflake != nil && sec.Snowflake.Leases != "" {
		dsns = append(dsns, sec.Snowflake.Leases)
	}
	var done, seen []string
	for _, dsn := range dsns {
		cc, err := pgsession.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(servers, func(s Server) bool { return int(cc.Port) == s.Port })
		if i < 0 || (cc.Host != "127.0.0.1" && cc.Host != "localhost") {
			continue
		}
		name := servers[i].Name + "/" + cc.Database
		if slices.Contains(seen, name) {
			continue
		}
		seen = append(seen, name)
		changed, err := closeDatabase(ctx, cc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if changed != "" {
			done = append(done, name+changed)
		}
	}
	return done, nil
}

// closeDatabase creates cc's database when missing and revokes CONNECT on
// it from PUBLIC; it says what it did: "" (nothing), " (created)" or
// " (CONNECT revoked)".
func closeDatabase(ctx context.Context, cc *pgx.ConnConfig) (string, error) {
	created, err := pgdatabase.EnsureConfig(ctx, cc)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return "", pgsession.ServerFirst(err)
	}
	defer conn.Close(ctx)
	open, err := pgdatabase.PublicCanConnect(ctx, conn, cc.Database)
	if err != nil || !open {
		if created {
			return " (created)", err
		}
		return "", err
	}
	if _, err := conn.Exec(ctx, "REVOKE CONNECT ON DATABASE "+pgx.Identifier{cc.Database}.Sanitize()+" FROM PUBLIC"); err != nil {
		return "", fmt.Errorf("revoke CONNECT from PUBLIC: %w", err)
	}
	if created {
		return " (created, CONNECT revoked)", nil
	}
	return " (CONNECT revoked)", nil
}
