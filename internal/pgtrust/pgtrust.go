// Package pgtrust checks, on a connection, that a schema the toolkit
// writes into was made by the toolkit: before anything writes there.
//
// The toolkit's role is the role its DSN logs in as (session_user, and
// current_user when the session changed role), and every superuser. A
// schema, or any table, view, sequence, function, type or operator in it,
// owned by another role is refused, as is a trigger on one of its tables
// whose function another role owns, a rule or a row-level policy on a
// table of another role, and (for the toolkit's own schema) CREATE on the
// schema granted to another role. Otherwise that role could run its code
// as the toolkit's role (often a superuser) the next time the toolkit
// writes there: a statement trigger on shardid.local_shards that runs
// ALTER ROLE ... SUPERUSER, or a counter it replaces under a generator.
//
// It must never trust an object for its name, its comment or what it
// holds: only for its owner. It changes nothing; the error names the
// object, its owner and the fix (ALTER ... OWNER TO, or DROP).
package pgtrust

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUntrusted is wrapped by every refusal: an object the toolkit would
// write through was made by a role it does not trust.
var ErrUntrusted = errors.New("made by a role the toolkit does not trust")

// Querier is what the checks need of a connection: a *pgx.Conn,
// *pgxpool.Pool or pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Execer is a Querier that also executes statements.
type Execer interface {
	Querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Finding is one object the toolkit does not trust.
type Finding struct {
	// Object is its kind and qualified name, quoted as SQL takes it:
	// `schema shardid`, `table shardid.host_info`,
	// `trigger t on shardid.local_shards`.
	Object string `json:"object"`
	// Owner is the role that owns it (for a trigger, its function's
	// owner; for a rule or policy, its table's owner; for a grant, the
	// grantee).
	Owner string `json:"owner"`
	// Fix is the SQL that makes it trusted or removes it.
	Fix string `json:"fix"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s belongs to %s (fix: %s)", f.Object, f.Owner, f.Fix)
}

// UntrustedError lists what a check found in one database. It wraps
// ErrUntrusted.
type UntrustedError struct {
	// Database is the database checked.
	Database string
	// Role is the toolkit's role there (the session's login role).
	Role     string
	Findings []Finding
}

func (e *UntrustedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "database %s: %s belongs to %s, not to %s (the role this connection logs in as) or a superuser: %v; nothing was written; fix: %s",
		e.Database, e.Findings[0].Object, e.Findings[0].Owner, e.Role, ErrUntrusted, e.Findings[0].Fix)
	if n := len(e.Findings) - 1; n > 0 {
		rest := make([]string, 0, min(n, 4))
		for _, f := range e.Findings[1:min(len(e.Findings), 5)] {
			rest = append(rest, f.Object+" (owner "+f.Owner+")")
		}
		fmt.Fprintf(&b, "; and %d more: %s", n, strings.Join(rest, ", "))
		if n > 4 {
			b.WriteString(", ...")
		}
	}
	return b.String()
}

func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// findingsSQL lists the untrusted objects of the schemas $1: every
// object in them when $2 is NULL, else only the schema itself and the relations and
// functions named in $2 (with the triggers, rules and policies on those
// relations). The trusted roles are the session's and current role and
// the superusers.
const findingsSQL = `
WITH trusted AS (
    SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper OR rolname IN (current_user, session_user)
), me AS (
    SELECT pg_catalog.quote_ident(session_user::text) AS role
), ns AS (
    SELECT oid, nspname, nspowner, nspacl, pg_catalog.quote_ident(nspname) AS q
    FROM pg_catalog.pg_namespace WHERE nspname = ANY ($1)
), rels AS (
    SELECT c.oid, c.relkind, c.relowner, ns.q || '.' || pg_catalog.quote_ident(c.relname) AS q
    FROM pg_catalog.pg_class c JOIN ns ON c.relnamespace = ns.oid
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND ($2::text[] IS NULL OR c.relname = ANY ($2))
), kinds (relkind, kind, dropkind) AS (
    VALUES ('r'::"char", 'table', 'TABLE'), ('p', 'table', 'TABLE'), ('v', 'view', 'VIEW'),
        ('m', 'materialized view', 'MATERIALIZED VIEW'), ('S', 'sequence', 'SEQUENCE'), ('f', 'foreign table', 'FOREIGN TABLE')
)
SELECT 0 AS o, 'schema ' || ns.q, nspowner::pg_catalog.regrole::text,
    'DROP SCHEMA ' || ns.q || ' CASCADE (or, once you have checked everything in it, ALTER SCHEMA ' || ns.q || ' OWNER TO ' || me.role || ')'
FROM ns, me WHERE nspowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 1, 'CREATE on schema ' || ns.q, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END,
    'REVOKE CREATE ON SCHEMA ' || ns.q || ' FROM ' || CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::text END
FROM ns, pg_catalog.aclexplode(ns.nspacl) a
WHERE $2::text[] IS NULL AND a.privilege_type = 'CREATE' AND a.grantee NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 2, k.kind || ' ' || r.q, r.relowner::pg_catalog.regrole::text,
    'DROP ' || k.dropkind || ' ' || r.q || ' (or ALTER ' || k.dropkind || ' ' || r.q || ' OWNER TO ' || me.role || ')'
FROM rels r JOIN kinds k USING (relkind), me WHERE r.relowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 3, CASE WHEN p.prokind = 'p' THEN 'procedure ' ELSE 'function ' END || p.oid::pg_catalog.regprocedure::text, p.proowner::pg_catalog.regrole::text,
    'DROP ROUTINE ' || p.oid::pg_catalog.regprocedure::text || ' (or ALTER ROUTINE ' || p.oid::pg_catalog.regprocedure::text || ' OWNER TO ' || me.role || ')'
FROM pg_catalog.pg_proc p JOIN ns ON p.pronamespace = ns.oid, me
WHERE ($2::text[] IS NULL OR p.proname = ANY ($2)) AND p.proowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 4, 'type ' || t.oid::pg_catalog.regtype::text, t.typowner::pg_catalog.regrole::text,
    'DROP TYPE ' || t.oid::pg_catalog.regtype::text || ' (or ALTER TYPE ' || t.oid::pg_catalog.regtype::text || ' OWNER TO ' || me.role || ')'
FROM pg_catalog.pg_type t JOIN ns ON t.typnamespace = ns.oid, me
WHERE $2::text[] IS NULL AND t.typrelid = 0 AND t.typowner NOT IN (SELECT oid FROM trusted)
    AND NOT EXISTS (SELECT FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
UNION ALL
SELECT 5, 'operator ' || o.oid::pg_catalog.regoperator::text, o.oprowner::pg_catalog.regrole::text,
    'DROP OPERATOR ' || o.oid::pg_catalog.regoperator::text
FROM pg_catalog.pg_operator o JOIN ns ON o.oprnamespace = ns.oid
WHERE $2::text[] IS NULL AND o.oprowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 6, 'trigger ' || pg_catalog.quote_ident(tg.tgname) || ' on ' || r.q, p.proowner::pg_catalog.regrole::text,
    'DROP TRIGGER ' || pg_catalog.quote_ident(tg.tgname) || ' ON ' || r.q
FROM pg_catalog.pg_trigger tg JOIN rels r ON tg.tgrelid = r.oid JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid
WHERE NOT tg.tgisinternal AND (p.proowner NOT IN (SELECT oid FROM trusted) OR r.relowner NOT IN (SELECT oid FROM trusted))
UNION ALL
SELECT 7, 'rule ' || pg_catalog.quote_ident(rw.rulename) || ' on ' || r.q, r.relowner::pg_catalog.regrole::text,
    'DROP RULE ' || pg_catalog.quote_ident(rw.rulename) || ' ON ' || r.q
FROM pg_catalog.pg_rewrite rw JOIN rels r ON rw.ev_class = r.oid
WHERE rw.rulename <> '_RETURN' AND r.relowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT 8, 'policy ' || pg_catalog.quote_ident(pol.polname) || ' on ' || r.q, r.relowner::pg_catalog.regrole::text,
    'DROP POLICY ' || pg_catalog.quote_ident(pol.polname) || ' ON ' || r.q
FROM pg_catalog.pg_policy pol JOIN rels r ON pol.polrelid = r.oid
WHERE r.relowner NOT IN (SELECT oid FROM trusted)
ORDER BY 1, 2`

// Findings lists what the toolkit does not trust in schemas: every
// object in them when names is nil, else each schema itself and the
// relations and functions of those names in it (a shard schema, which
// also holds the application's tables: its owner, and the toolkit's
// version tables and generator). A schema that does not exist has none.
func Findings(ctx context.Context, q Querier, schemas []string, names []string) ([]Finding, error) {
	rows, err := q.Query(ctx, findingsSQL, schemas, names)
	if err != nil {
		return nil, fmt.Errorf("check the owners in %s: %w", describe(schemas), err)
	}
	var out []Finding
	var order int
	var f Finding
	_, err = pgx.ForEachRow(rows, []any{&order, &f.Object, &f.Owner, &f.Fix}, func() error {
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check the owners in %s: %w", describe(schemas), err)
	}
	return out, nil
}

// describe names schemas for an error.
func describe(schemas []string) string {
	if len(schemas) == 1 {
		return "schema " + schemas[0]
	}
	return fmt.Sprintf("%d schemas", len(schemas))
}

// Check refuses, with an *UntrustedError, schema when Findings finds
// anything in it: every object in it. A missing schema passes.
func Check(ctx context.Context, q Querier, schema string) error {
	return check(ctx, q, []string{schema}, nil)
}

// CheckNamed refuses, with an *UntrustedError, any of schemas whose
// owner, or whose relations or functions called one of names, Findings
// finds untrusted: for shard schemas, which hold the application's
// tables beside the toolkit's. Missing schemas pass.
func CheckNamed(ctx context.Context, q Querier, schemas []string, names ...string) error {
	if len(schemas) == 0 {
		return nil
	}
	return check(ctx, q, schemas, append([]string{}, names...))
}

func check(ctx context.Context, q Querier, schemas, names []string) error {
	found, err := Findings(ctx, q, schemas, names)
	if err != nil || len(found) == 0 {
		return err
	}
	var db, role string
	if err := q.QueryRow(ctx, `SELECT current_database(), session_user`).Scan(&db, &role); err != nil {
		return fmt.Errorf("check the owners in %s: %w", describe(schemas), err)
	}
	return &UntrustedError{Database: db, Role: role, Findings: found}
}

// EnsureSchema checks schema as Check does (every object in it) and
// creates it when missing. It never adopts a schema another role made
// meanwhile, as CREATE SCHEMA IF NOT EXISTS would: one made between the
// check and the creation is checked in turn.
func EnsureSchema(ctx context.Context, db Execer, schema string) error {
	for range 2 {
		if err := Check(ctx, db, schema); err != nil {
			return err
		}
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return fmt.Errorf("look for schema %s: %w", schema, err)
		}
		if exists {
			return nil
		}
		_, err := db.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == pgerrcode.DuplicateSchema || pe.Code == pgerrcode.UniqueViolation) {
			continue // made meanwhile: check it
		}
		if err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
		return nil
	}
	return Check(ctx, db, schema)
}
