package grants

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/shardid/shardid/shardmgr/internal/base/fence"
	"github.com/shardid/shardid/shardmgr/internal/base/pg"
	"github.com/shardid/shardid/shardmgr/internal/base/shardschema"
	shsql "github.com/shardid/shardid/sql"
)

// Toolkit names what the toolkit makes in every shard schema: Objects by
// bare name (functions, sequences, tables), Triggers by trigger name.
type Toolkit struct {
	Objects  map[string]bool
	Triggers map[string]bool
}

// Schema is what one copy of a shard schema carries besides its rows.
type Schema struct {
	// Name is the schema's name on its host.
	Name string
	// Objects are the schema itself, its relations, routines and types,
	// and its columns with privileges of their own, by Object.Key.
	Objects map[string]*Object
	// Defaults are the default privileges set in the schema, sorted.
	Defaults map[Default][]Entry
	// RLS is each table's row-level security: "", "ENABLE" or
	// "ENABLE FORCE", by relative name.
	RLS map[string]string
	// Policies are row-level security policies by "policy ON table".
	Policies map[string]Trigger
	// Triggers are user triggers by "trigger ON table".
	Triggers map[string]Trigger
	// Comments are COMMENT ON targets ("TABLE s.t", "COLUMN s.t.c") ->
	// text, the schema's own comment aside (the toolkit's marker).
	Comments map[string]string

	policyRoles []string
}

// Default names the default privileges for the objects that Role makes:
// Objects is TABLES, SEQUENCES, FUNCTIONS or TYPES.
type Default struct{ Role, Objects string }

func (d Default) String() string { return "for role " + d.Role + " on " + strings.ToLower(d.Objects) }

// Object is one object of a schema with its owner and privileges.
type Object struct {
	// Kind is the GRANT keyword: SCHEMA, TABLE, SEQUENCE, ROUTINE, TYPE,
	// DOMAIN; COLUMN for a column's own privileges.
	Kind string
	// Alter is the ALTER keyword that changes its owner; empty when its
	// owner follows another object's (a sequence owned by a column, a
	// column).
	Alter string
	// Name is quoted and relative to the schema: "t", "f(integer)"; for a
	// column its table's, with Column the column's (quoted).
	Name, Column string
	// Owner is the owner's role name.
	Owner string
	// Toolkit marks the toolkit's own objects.
	Toolkit bool
	// ACL is the privileges as they are (the owner's defaults spelt out),
	// sorted.
	ACL []Entry
}

// Key identifies an object within its schema.
func (o *Object) Key() string {
	if o.Column != "" {
		return o.Kind + " " + o.Name + "." + o.Column
	}
	return o.Kind + " " + o.Name
}

// Entry is one privilege held by one role.
type Entry struct {
	// Grantee is a role name; "" is PUBLIC. In an Object's ACL, ownerRole
	// stands for the object's owner, whoever it is.
	Grantee   string
	Privilege string
	Grantable bool
}

// ownerRole stands for an object's owner in its ACL, so that copies whose
// toolkit objects have different owners compare.
const ownerRole = "\x00owner"

func (e Entry) String() string {
	g := e.Grantee
	switch g {
	case "":
		g = "PUBLIC"
	case ownerRole:
		g = "(owner)"
	}
	s := g + ":" + e.Privilege
	if e.Grantable {
		s += " WITH GRANT OPTION"
	}
	return s
}

// Trigger is a user trigger or a policy on Table (both quoted): its
// definition (CREATE statement), and a trigger's enabled state
// (pg_trigger.tgenabled: O, D, R, A).
type Trigger struct {
	Name, Table string
	Def         string
	Enabled     string
}

// Read reads schema as tx sees it. tx's search_path is set to pg_catalog
// for the transaction, so that every name in the definitions it reads
// (policies, triggers) comes out schema-qualified.
func Read(ctx context.Context, tx pgx.Tx, schema string, tk Toolkit) (*Schema, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('search_path', 'pg_catalog', true)`); err != nil {
		return nil, err
	}
	s := &Schema{Name: schema, Objects: map[string]*Object{}, Defaults: map[Default][]Entry{}, RLS: map[string]string{},
		Policies: map[string]Trigger{}, Triggers: map[string]Trigger{}, Comments: map[string]string{}}
	for _, step := range []func(context.Context, pgx.Tx, Toolkit) error{s.readObjects, s.readColumns, s.readDefaults, s.readRLS, s.readTriggers, s.readComments} {
		if err := step(ctx, tx, tk); err != nil {
			return nil, fmt.Errorf("read grants of %s: %w", schema, err)
		}
	}
	for _, o := range s.Objects {
		slices.SortFunc(o.ACL, compareEntries)
	}
	for k := range s.Defaults {
		slices.SortFunc(s.Defaults[k], compareEntries)
	}
	return s, nil
}

// ReadDB reads schema in a read-only transaction of its own on db.
func ReadDB(ctx context.Context, db pg.TxBeginner, schema string, tk Toolkit) (*Schema, error) {
	var s *Schema
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET TRANSACTION READ ONLY`); err != nil {
			return err
		}
		var err error
		s, err = Read(ctx, tx, schema, tk)
		return err
	})
	return s, err
}

func compareEntries(a, b Entry) int { return strings.Compare(a.String(), b.String()) }

// objectsSQL lists the schema, its relations, routines and types with
// owner and exploded ACL (NULL ACL: the owner's defaults). A sequence
// owned by a column, like a table's row type, follows its table's owner.
const objectsSQL = `WITH ns AS (SELECT oid, nspname, nspowner, nspacl FROM pg_catalog.pg_namespace WHERE nspname = $1),
objs AS (
  SELECT 'SCHEMA' AS kind, 'SCHEMA' AS alter, '' AS name, '' AS bare, ns.nspowner AS owner,
    coalesce(ns.nspacl, pg_catalog.acldefault('n'::"char", ns.nspowner)) AS acl FROM ns
  UNION ALL
  SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
    CASE WHEN c.relkind IN ('r', 'p') THEN 'TABLE' WHEN c.relkind = 'v' THEN 'VIEW'
      WHEN c.relkind = 'm' THEN 'MATERIALIZED VIEW' WHEN c.relkind = 'f' THEN 'FOREIGN TABLE'
      WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
        AND d.objid = c.oid AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')) THEN 'SEQUENCE' ELSE '' END,
    pg_catalog.format('%I', c.relname), c.relname, c.relowner,
    coalesce(c.relacl, pg_catalog.acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", c.relowner))
  FROM pg_catalog.pg_class c JOIN ns ON c.relnamespace = ns.oid WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  UNION ALL
  SELECT 'ROUTINE', 'ROUTINE', pg_catalog.format('%I(%s)', p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)),
    p.proname, p.proowner, coalesce(p.proacl, pg_catalog.acldefault('f'::"char", p.proowner))
  FROM pg_catalog.pg_proc p JOIN ns ON p.pronamespace = ns.oid
  UNION ALL
  SELECT CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END,
    CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END,
    pg_catalog.format('%I', t.typname), t.typname, t.typowner, coalesce(t.typacl, pg_catalog.acldefault('T'::"char", t.typowner))
  FROM pg_catalog.pg_type t JOIN ns ON t.typnamespace = ns.oid
  WHERE t.typtype IN ('b', 'c', 'd', 'e', 'r') -- a multirange's privileges are its range's
    AND (t.typrelid = 0 OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')
    AND NOT EXISTS (SELECT FROM pg_catalog.pg_type e WHERE e.typarray = t.oid)
)
SELECT o.kind, o.alter, o.name, o.bare, pg_catalog.pg_get_userbyid(o.owner),
  a.grantee = o.owner, CASE WHEN a.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
  a.privilege_type, a.is_grantable
FROM objs o LEFT JOIN LATERAL pg_catalog.aclexplode(o.acl) a ON true`

func (s *Schema) readObjects(ctx context.Context, tx pgx.Tx, tk Toolkit) error {
	rows, err := tx.Query(ctx, objectsSQL, s.Name)
	if err != nil {
		return err
	}
	var kind, alter, name, bare, owner string
	var isOwner *bool
	var grantee, priv *string
	var grantable *bool
	_, err = pgx.ForEachRow(rows, []any{&kind, &alter, &name, &bare, &owner, &isOwner, &grantee, &priv, &grantable}, func() error {
		o := &Object{Kind: kind, Alter: alter, Name: name, Owner: owner, Toolkit: kind != "SCHEMA" && tk.Objects[bare]}
		if prev, ok := s.Objects[o.Key()]; ok {
			o = prev
		} else {
			s.Objects[o.Key()] = o
		}
		if priv == nil { // an empty ACL: nobody may do anything
			return nil
		}
		e := Entry{Grantee: *grantee, Privilege: *priv, Grantable: *grantable}
		if *isOwner {
			e.Grantee = ownerRole
		}
		o.ACL = append(o.ACL, e)
		return nil
	})
	return err
}

func (s *Schema) readColumns(ctx context.Context, tx pgx.Tx, _ Toolkit) error {
	rows, err := tx.Query(ctx, `SELECT pg_catalog.format('%I', c.relname), pg_catalog.format('%I', a.attname), pg_catalog.pg_get_userbyid(c.relowner),
			e.grantee = c.relowner, CASE WHEN e.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(e.grantee) END, e.privilege_type, e.is_grantable
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN LATERAL pg_catalog.aclexplode(a.attacl) e
		WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL`, s.Name)
	if err != nil {
		return err
	}
	var table, column, owner, grantee, priv string
	var isOwner, grantable bool
	_, err = pgx.ForEachRow(rows, []any{&table, &column, &owner, &isOwner, &grantee, &priv, &grantable}, func() error {
		o := &Object{Kind: "COLUMN", Name: table, Column: column, Owner: owner}
		if prev, ok := s.Objects[o.Key()]; ok {
			o = prev
		} else {
			s.Objects[o.Key()] = o
		}
		e := Entry{Grantee: grantee, Privilege: priv, Grantable: grantable}
		if isOwner {
			e.Grantee = ownerRole
		}
		o.ACL = append(o.ACL, e)
		return nil
	})
	return err
}

// defaultObjects are ALTER DEFAULT PRIVILEGES' words for pg_default_acl's
// object types that a schema's default privileges can name.
var defaultObjects = map[string]string{"r": "TABLES", "S": "SEQUENCES", "f": "FUNCTIONS", "T": "TYPES"}

func (s *Schema) readDefaults(ctx context.Context, tx pgx.Tx, _ Toolkit) error {
	rows, err := tx.Query(ctx, `SELECT pg_catalog.pg_get_userbyid(d.defaclrole), d.defaclobjtype::text,
			CASE WHEN e.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(e.grantee) END, e.privilege_type, e.is_grantable
		FROM pg_catalog.pg_default_acl d JOIN pg_catalog.pg_namespace n ON n.oid = d.defaclnamespace
		CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) e WHERE n.nspname = $1`, s.Name)
	if err != nil {
		return err
	}
	var role, objType, grantee, priv string
	var grantable bool
	_, err = pgx.ForEachRow(rows, []any{&role, &objType, &grantee, &priv, &grantable}, func() error {
		word, ok := defaultObjects[objType]
		if !ok {
			return fmt.Errorf("default privileges for objects of type %q", objType)
		}
		k := Default{Role: role, Objects: word}
		s.Defaults[k] = append(s.Defaults[k], Entry{Grantee: grantee, Privilege: priv, Grantable: grantable})
		return nil
	})
	return err
}

func (s *Schema) readRLS(ctx context.Context, tx pgx.Tx, _ Toolkit) error {
	rows, err := tx.Query(ctx, `SELECT pg_catalog.format('%I', c.relname), c.relrowsecurity, c.relforcerowsecurity
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`, s.Name)
	if err != nil {
		return err
	}
	var table string
	var on, force bool
	_, err = pgx.ForEachRow(rows, []any{&table, &on, &force}, func() error {
		switch {
		case on && force:
			s.RLS[table] = "ENABLE FORCE"
		case on:
			s.RLS[table] = "ENABLE"
		case force:
			s.RLS[table] = "FORCE"
		default:
			s.RLS[table] = ""
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `SELECT pg_catalog.format('%I', c.relname), pg_catalog.format('%I', p.polname), p.polpermissive, p.polcmd::text,
			array(SELECT CASE WHEN r = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(r) END FROM pg_catalog.unnest(p.polroles) r ORDER BY 1),
			pg_catalog.pg_get_expr(p.polqual, p.polrelid), pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid)
		FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, s.Name)
	if err != nil {
		return err
	}
	var policy, cmd string
	var permissive bool
	var roles []string
	var qual, check *string
	qs := pgx.Identifier{s.Name}.Sanitize()
	_, err = pgx.ForEachRow(rows, []any{&table, &policy, &permissive, &cmd, &roles, &qual, &check}, func() error {
		as := "RESTRICTIVE"
		if permissive {
			as = "PERMISSIVE"
		}
		for i, r := range roles {
			s.policyRoles = append(s.policyRoles, r)
			roles[i] = granteeSQL(r)
		}
		def := fmt.Sprintf("CREATE POLICY %s ON %s.%s AS %s FOR %s TO %s", policy, qs, table, as, policyCommands[cmd], strings.Join(roles, ", "))
		if qual != nil {
			def += " USING (" + *qual + ")"
		}
		if check != nil {
			def += " WITH CHECK (" + *check + ")"
		}
		s.Policies[policy+" ON "+table] = Trigger{Name: policy, Table: table, Def: def}
		return nil
	})
	return err
}

// policyCommands are pg_policy's polcmd as CREATE POLICY's FOR.
var policyCommands = map[string]string{"*": "ALL", "r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE"}

func (s *Schema) readTriggers(ctx context.Context, tx pgx.Tx, tk Toolkit) error {
	skip := []string{} // not NULL: <> ALL (NULL) is never true
	for name := range tk.Triggers {
		skip = append(skip, name)
	}
	rows, err := tx.Query(ctx, `SELECT pg_catalog.format('%I', c.relname), pg_catalog.format('%I', t.tgname),
			pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled::text
		FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND NOT t.tgisinternal AND t.tgparentid = 0 AND t.tgname <> ALL ($2)`, s.Name, skip)
	if err != nil {
		return err
	}
	var tr Trigger
	_, err = pgx.ForEachRow(rows, []any{&tr.Table, &tr.Name, &tr.Def, &tr.Enabled}, func() error {
		s.Triggers[tr.Name+" ON "+tr.Table] = tr
		return nil
	})
	return err
}

// commentTargets are pg_identify_object's types as COMMENT ON's words,
// for the objects a shard schema holds.
var commentTargets = map[string]string{
	"table": "TABLE", "index": "INDEX", "sequence": "SEQUENCE", "view": "VIEW", "materialized view": "MATERIALIZED VIEW",
	"foreign table": "FOREIGN TABLE", "table column": "COLUMN", "view column": "COLUMN", "materialized view column": "COLUMN",
	"foreign table column": "COLUMN", "composite type column": "COLUMN", "type": "TYPE", "composite type": "TYPE", "domain": "DOMAIN",
	"function": "FUNCTION", "procedure": "PROCEDURE", "aggregate": "AGGREGATE", "trigger": "TRIGGER", "policy": "POLICY",
	"table constraint": "CONSTRAINT",
}

func (s *Schema) readComments(ctx context.Context, tx pgx.Tx, _ Toolkit) error {
	rows, err := tx.Query(ctx, `WITH ns AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1)
		SELECT o.type, o.identity, d.description FROM pg_catalog.pg_description d
		CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.classoid, d.objoid, d.objsubid) o
		WHERE (d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objoid IN (SELECT c.oid FROM pg_catalog.pg_class c JOIN ns ON c.relnamespace = ns.oid))
		   OR (d.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objoid IN (SELECT p.oid FROM pg_catalog.pg_proc p JOIN ns ON p.pronamespace = ns.oid))
		   OR (d.classoid = 'pg_catalog.pg_type'::pg_catalog.regclass AND d.objoid IN (SELECT t.oid FROM pg_catalog.pg_type t JOIN ns ON t.typnamespace = ns.oid))
		   OR (d.classoid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND d.objoid IN (SELECT k.oid FROM pg_catalog.pg_constraint k JOIN ns ON k.connamespace = ns.oid WHERE k.conrelid <> 0))
		   OR (d.classoid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND d.objoid IN (SELECT t.oid FROM pg_catalog.pg_trigger t
		         JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid JOIN ns ON c.relnamespace = ns.oid))
		   OR (d.classoid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND d.objoid IN (SELECT p.oid FROM pg_catalog.pg_policy p
		         JOIN pg_catalog.pg_class c ON c.oid = p.polrelid JOIN ns ON c.relnamespace = ns.oid))`, s.Name)
	if err != nil {
		return err
	}
	var typ, identity, text string
	_, err = pgx.ForEachRow(rows, []any{&typ, &identity, &text}, func() error {
		if word, ok := commentTargets[typ]; ok {
			s.Comments[word+" "+identity] = text
		}
		return nil
	})
	return err
}

// granteeSQL is a grantee as GRANT and CREATE POLICY take it.
func granteeSQL(role string) string {
	if role == "" {
		return "PUBLIC"
	}
	return pgx.Identifier{role}.Sanitize()
}

// Roles are the roles s names (owners of objects other than the toolkit's,
// grantees, default privileges' roles, policies' roles), sorted.
func (s *Schema) Roles() []string {
	seen := map[string]bool{}
	add := func(r string) {
		if r != "" && r != ownerRole {
			seen[r] = true
		}
	}
	for _, o := range s.Objects {
		if !o.Toolkit {
			add(o.Owner)
		}
		for _, e := range o.ACL {
			add(e.Grantee)
		}
	}
	for k, es := range s.Defaults {
		add(k.Role)
		for _, e := range es {
			add(e.Grantee)
		}
	}
	for _, r := range s.policyRoles {
		add(r)
	}
	return slices.Sorted(func(yield func(string) bool) {
		for r := range seen {
			if !yield(r) {
				return
			}
		}
	})
}

// ShardToolkit is what the toolkit makes in every shard schema: the
// generator, its counter and helpers, the fence and the migrations'
// bookkeeping. Their owner is the toolkit's role on each host and their
// grants to PUBLIC the toolkit's.
func ShardToolkit(triggers ...string) Toolkit {
	tk := Toolkit{
		Objects: map[string]bool{
			shsql.FunctionName: true, shsql.CounterName: true, shsql.PullUpName: true, shsql.AdvanceName: true,
			shsql.InstagramSeqName: true, "id_time": true, "id_shard": true, "id_seq": true, fence.Name: true,
			shardschema.VersionTable: true, shardschema.FailureTable: true,
		},
		Triggers: map[string]bool{fence.Name: true},
	}
	for _, t := range triggers {
		tk.Triggers[t] = true
	}
	return tk
}
