package grants

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardid/shardid/shardmgr/internal/base/pg"
)

// ErrMissingRole is a role that a shard's grants name and that the host
// the shard is copied to does not have.
var ErrMissingRole = errors.New("role missing")

// privileges are the privilege names aclexplode returns; nothing else
// reaches a GRANT.
var privileges = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "TRUNCATE": true, "REFERENCES": true,
	"TRIGGER": true, "EXECUTE": true, "USAGE": true, "CREATE": true, "MAINTAIN": true,
}

// Carry makes the schema src.Name that tx sees (a move's target) carry
// what src (the source's copy, read with Read) carries: owners, privileges,
// default privileges, row-level security and policies, user triggers and
// comments. The roles src names must exist where tx runs (ErrMissingRole
// names those that do not). It runs in tx; running it again changes
// nothing.
func Carry(ctx context.Context, tx pgx.Tx, src *Schema, tk Toolkit) error {
	if err := CheckRoles(ctx, tx, src); err != nil {
		return err
	}
	dst, err := Read(ctx, tx, src.Name, tk)
	if err != nil {
		return err
	}
	qs := pgx.Identifier{src.Name}.Sanitize()
	run := func(sql string) error {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
		return nil
	}
	// Owners first: a new owner takes over the old one's privileges.
	changed := false
	for _, k := range slices.Sorted(maps.Keys(src.Objects)) {
		so, do := src.Objects[k], dst.Objects[k]
		if do == nil || so.Toolkit || so.Alter == "" || so.Owner == do.Owner {
			continue
		}
		if err := run(fmt.Sprintf("ALTER %s %s OWNER TO %s", so.Alter, so.qualified(qs), pgx.Identifier{so.Owner}.Sanitize())); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		if dst, err = Read(ctx, tx, src.Name, tk); err != nil {
			return err
		}
	}
	var stmts []string
	for _, k := range slices.Sorted(maps.Keys(union(src.Objects, dst.Objects))) {
		so, do := src.Objects[k], dst.Objects[k]
		if so == nil && do != nil && do.Kind == "COLUMN" {
			so = &Object{Kind: do.Kind, Name: do.Name, Column: do.Column}
		}
		if do == nil && so != nil && so.Kind == "COLUMN" {
			do = &Object{Kind: so.Kind, Name: so.Name, Column: so.Column, Owner: so.Owner}
		}
		if so == nil || do == nil {
			continue // an object the other copy lacks: no privileges to carry
		}
		revoke, grant := aclDiff(so, do)
		for _, e := range revoke {
			stmts = append(stmts, fmt.Sprintf("REVOKE %s ON %s FROM %s CASCADE", do.privilege(e), do.target(qs), granteeSQL(do.grantee(e))))
		}
		for _, e := range grant {
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s TO %s%s", do.privilege(e), do.target(qs), granteeSQL(do.grantee(e)), grantOption(e)))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(union(src.Defaults, dst.Defaults)), func(a, b Default) int { return strings.Compare(a.String(), b.String()) }) {
		revoke, grant := entryDiff(src.Defaults[k], dst.Defaults[k])
		prefix := fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s ", pgx.Identifier{k.Role}.Sanitize(), qs)
		for _, e := range revoke {
			stmts = append(stmts, prefix+fmt.Sprintf("REVOKE %s ON %s FROM %s CASCADE", checked(e.Privilege), k.Objects, granteeSQL(e.Grantee)))
		}
		for _, e := range grant {
			stmts = append(stmts, prefix+fmt.Sprintf("GRANT %s ON %s TO %s%s", checked(e.Privilege), k.Objects, granteeSQL(e.Grantee), grantOption(e)))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(src.RLS)) {
		want, have := src.RLS[t], dst.RLS[t]
		if _, ok := dst.RLS[t]; !ok || want == have {
			continue
		}
		on, force := "DISABLE", "NO FORCE"
		if strings.HasPrefix(want, "ENABLE") {
			on = "ENABLE"
		}
		if strings.HasSuffix(want, "FORCE") {
			force = "FORCE"
		}
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s.%s %s ROW LEVEL SECURITY, %s ROW LEVEL SECURITY", qs, t, on, force))
	}
	stmts = append(stmts, definitions(qs, "POLICY", src.Policies, dst.Policies)...)
	stmts = append(stmts, definitions(qs, "TRIGGER", src.Triggers, dst.Triggers)...)
	for _, k := range slices.Sorted(maps.Keys(src.Triggers)) {
		t := src.Triggers[k]
		if d, ok := dst.Triggers[k]; ok && d.Def == t.Def && d.Enabled == t.Enabled {
			continue
		}
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s.%s %s TRIGGER %s", qs, t.Table, triggerStates[t.Enabled], t.Name))
	}
	for _, sql := range stmts {
		if err := run(sql); err != nil {
			return err
		}
	}
	// A comment on an object the target lacks (an index made by hand,
	// which the copy builds later) is left out.
	for _, k := range slices.Sorted(maps.Keys(union(src.Comments, dst.Comments))) {
		want, ok := src.Comments[k]
		if have, had := dst.Comments[k]; ok == had && want == have {
			continue
		}
		text := "NULL"
		if ok {
			text = pg.QuoteLiteral(want)
		}
		sql := fmt.Sprintf("SAVEPOINT shardid_comment; COMMENT ON %s IS %s; RELEASE SAVEPOINT shardid_comment", k, text)
		if _, err := tx.Exec(ctx, sql); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || (pe.Code != pgerrcode.UndefinedObject && pe.Code != pgerrcode.UndefinedTable && pe.Code != pgerrcode.UndefinedFunction) {
				return fmt.Errorf("%s: %w", sql, err)
			}
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT shardid_comment`); err != nil {
				return err
			}
		}
	}
	return nil
}

// triggerStates are pg_trigger.tgenabled as ALTER TABLE's words.
var triggerStates = map[string]string{"O": "ENABLE", "D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}

// definitions drops the policies or triggers of dst that src lacks or
// defines otherwise and creates src's in their place.
func definitions(qs, what string, src, dst map[string]Trigger) []string {
	var stmts []string
	for _, k := range slices.Sorted(maps.Keys(union(src, dst))) {
		s, inSrc := src[k]
		d, inDst := dst[k]
		if inSrc && inDst && s.Def == d.Def {
			continue
		}
		if inDst {
			stmts = append(stmts, fmt.Sprintf("DROP %s %s ON %s.%s", what, d.Name, qs, d.Table))
		}
		if inSrc {
			stmts = append(stmts, s.Def)
		}
	}
	return stmts
}

// CheckRoles refuses (ErrMissingRole, naming them) when the server q is
// on lacks roles that src names.
func CheckRoles(ctx context.Context, q pg.Querier, src *Schema) error {
	var missing []string
	err := q.QueryRow(ctx, `SELECT coalesce(array_agg(r ORDER BY r), '{}') FROM pg_catalog.unnest($1::text[]) r
		WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r)`, src.Roles()).Scan(&missing)
	if err != nil {
		return fmt.Errorf("read roles: %w", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the shard's grants name %s, which this host lacks (hosts must share the roles that shards grant to)",
			ErrMissingRole, strings.Join(missing, ", "))
	}
	return nil
}

func union[K comparable, V any](a, b map[K]V) map[K]bool {
	u := map[K]bool{}
	for k := range a {
		u[k] = true
	}
	for k := range b {
		u[k] = true
	}
	return u
}

// aclDiff is what must be revoked from do and granted on it for its
// privileges to be so's. A toolkit object keeps do's grants to PUBLIC.
func aclDiff(so, do *Object) (revoke, grant []Entry) {
	want, have := so.ACL, do.ACL
	if so.Toolkit || do.Toolkit {
		public := func(e Entry) bool { return e.Grantee == "" }
		want = slices.DeleteFunc(slices.Clone(want), public)
		have = slices.DeleteFunc(slices.Clone(have), public)
	}
	return entryDiff(want, have)
}

// entryDiff is what must be revoked from have and granted for it to be
// want.
func entryDiff(want, have []Entry) (revoke, grant []Entry) {
	in := func(es []Entry, e Entry) bool { return slices.Contains(es, e) }
	for _, e := range have {
		if !in(want, e) {
			revoke = append(revoke, e)
		}
	}
	for _, e := range want {
		if !in(have, e) {
			grant = append(grant, e)
		}
	}
	return revoke, grant
}

// checked is a privilege name from the catalog, refused (as an invalid
// word) unless it is one PostgreSQL knows.
func checked(p string) string {
	if privileges[p] {
		return p
	}
	return pgx.Identifier{p}.Sanitize()
}

func (o *Object) qualified(qs string) string {
	if o.Kind == "SCHEMA" {
		return qs
	}
	return qs + "." + o.Name
}

// target is the object as GRANT names it.
func (o *Object) target(qs string) string {
	if o.Kind == "COLUMN" {
		return "TABLE " + qs + "." + o.Name
	}
	return o.Kind + " " + o.qualified(qs)
}

// privilege is e's privilege as GRANT takes it on o.
func (o *Object) privilege(e Entry) string {
	if o.Kind == "COLUMN" {
		return checked(e.Privilege) + " (" + o.Column + ")"
	}
	return checked(e.Privilege)
}

// grantee is e's grantee on o, the owner's role for ownerRole.
func (o *Object) grantee(e Entry) string {
	if e.Grantee == ownerRole {
		return o.Owner
	}
	return e.Grantee
}

func grantOption(e Entry) string {
	if e.Grantable {
		return " WITH GRANT OPTION"
	}
	return ""
}
