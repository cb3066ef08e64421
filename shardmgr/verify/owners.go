package verify

import (
	"context"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"

	shsql "github.com/shardid/shardid/sql"
)

// toolkitTriggers are the triggers shardid puts on a shard's tables: the
// fence and a move's change log. Whoever owns the function one of them
// runs decides whether the fence holds.
var toolkitTriggers = []string{"shardid_fence", "shardid_delta", "shardid_delta_truncate"}

// ownedByOthersSQL finds, in every schema that holds a shard (its own, a
// retired copy, or a generator's), the toolkit's objects that a role other
// than the toolkit's owns: the generator's functions, the counter, the
// decode helpers and the fence function by name, and the function of
// every trigger the toolkit names. The toolkit's role is the role verify
// logs in as (session_user, and current_user) and every superuser: never
// the owner of an object, such as schema shardid, that a non-superuser
// could have made.
const ownedByOthersSQL = `
WITH trusted AS (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper OR rolname IN (current_user, session_user)),
toolkit AS (SELECT pg_catalog.quote_ident(session_user::text) AS role),
shards AS (
  SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n
  WHERE n.nspname ~ '^shard_[0-9]{4}(_moved_g[0-9]+)?$'
     OR EXISTS (SELECT FROM pg_catalog.pg_proc g WHERE g.pronamespace = n.oid AND g.proname = 'next_id' AND g.pronargs = 0))
SELECT s.nspname, pg_catalog.format('function %s', p.oid::pg_catalog.regprocedure),
       pg_catalog.pg_get_userbyid(p.proowner), t.role
  FROM shards s JOIN pg_catalog.pg_proc p ON p.pronamespace = s.oid, toolkit t
 WHERE p.proname = ANY ($1::pg_catalog.name[]) AND p.proowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT s.nspname, pg_catalog.format('sequence %s', c.oid::pg_catalog.regclass),
       pg_catalog.pg_get_userbyid(c.relowner), t.role
  FROM shards s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid, toolkit t
 WHERE c.relname = ANY ($2::pg_catalog.name[]) AND c.relowner NOT IN (SELECT oid FROM trusted)
UNION ALL
SELECT s.nspname, pg_catalog.format('function %s (run by trigger %s on %s)', p.oid::pg_catalog.regprocedure, tg.tgname, c.oid::pg_catalog.regclass),
       pg_catalog.pg_get_userbyid(p.proowner), t.role
  FROM shards s JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid
  JOIN pg_catalog.pg_trigger tg ON tg.tgrelid = c.oid
  JOIN pg_catalog.pg_proc p ON p.oid = tg.tgfoid, toolkit t
 WHERE tg.tgname = ANY ($3::pg_catalog.name[]) AND p.proowner NOT IN (SELECT oid FROM trusted)
ORDER BY 1, 2`

// foreignOwned is one of the toolkit's objects owned by another role.
type foreignOwned struct {
	schema, object, owner, toolkit string
}

// scanOwners reports the toolkit's objects in the host's shard schemas
// that a role other than the toolkit's owns (CheckOwner). Such a role
// (one with CREATE on the schema, which teams give their migration role)
// can replace the object: a fence function that lets every write
// through, a pull-up or advance that runs as its owner, a counter it may
// setval.
func (v *verifier) scanOwners(ctx context.Context, hs *hostScan) error {
	rows, err := hs.pool.Query(ctx, ownedByOthersSQL, shsql.OwnedObjects, shsql.OwnedSequences, toolkitTriggers)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (foreignOwned, error) {
		var f foreignOwned
		return f, r.Scan(&f.schema, &f.object, &f.owner, &f.toolkit)
	})
	if err != nil {
		return err
	}
	for _, f := range found {
		v.problemFix(FixInit, CheckOwner, shardOfOwned(f.schema, hs.generators[f.schema]), hs.name,
			"%s is owned by role %s, not by %s (the role verify logs in as, the toolkit's) or a superuser: %s can replace it (a fence that lets writes through, a generator that repeats ids); check what it does, then ALTER it OWNER TO %s, or drop it and install it again",
			f.object, f.owner, f.toolkit, f.owner, f.toolkit)
	}
	return nil
}

var retiredSchemaRE = regexp.MustCompile(`^shard_([0-9]{4})_moved_g[0-9]+$`)

// shardOfOwned names the shard a schema holding toolkit objects stands
// for (-1 when nothing tells).
func shardOfOwned(schema, marker string) int {
	if m := retiredSchemaRE.FindStringSubmatch(schema); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if id, ok := shardOfSchema(schema, marker); ok {
		return id
	}
	return -1
}
