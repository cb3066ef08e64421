package grants

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/internal/localpg/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

var roleCounter atomic.Int64

// The schema both copies get from their "migrations": objects of every
// kind a shard may hold, one with a hostile name.
const schemaDDL = `CREATE SCHEMA s;
CREATE TYPE s.mood AS ENUM ('ok', 'meh');
CREATE DOMAIN s.positive AS int CHECK (VALUE > 0);
CREATE TYPE s.span AS RANGE (subtype = int);
CREATE TYPE s.pair AS (a int, b int);
CREATE SEQUENCE s.loose;
CREATE TABLE s.t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner_id int NOT NULL, m s.mood, secret text);
CREATE INDEX t_owner ON s.t (owner_id);
CREATE TABLE s."x""; DROP TABLE s.t; --" (id int PRIMARY KEY);
CREATE TABLE s.ev (at date NOT NULL, v int) PARTITION BY RANGE (at);
CREATE TABLE s.ev_1 PARTITION OF s.ev FOR VALUES FROM ('2020-01-01') TO ('2030-01-01');
CREATE VIEW s.v AS SELECT id, owner_id FROM s.t;
CREATE FUNCTION s.f(a s.positive) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION s.trg() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE PROCEDURE s.p() LANGUAGE sql AS 'SELECT 1';
CREATE AGGREGATE s.total(int) (sfunc = int4pl, stype = int);`

// What only the source is given by hand: owners, privileges of every
// kind, default privileges, row-level security and policies, triggers and
// comments.
const handDDL = `ALTER TABLE s.t OWNER TO {owner};
ALTER SCHEMA s OWNER TO {owner};
ALTER TYPE s.mood OWNER TO {owner};
ALTER DOMAIN s.positive OWNER TO {owner};
ALTER FUNCTION s.f(s.positive) OWNER TO {owner};
GRANT USAGE ON SCHEMA s TO {app};
GRANT SELECT, INSERT ON s.t TO {app} WITH GRANT OPTION;
GRANT SELECT (secret), UPDATE (secret) ON s.t TO {app};
REVOKE ALL ON s.v FROM PUBLIC;
GRANT SELECT ON s.v TO PUBLIC;
GRANT INSERT ON s."x""; DROP TABLE s.t; --" TO {app};
GRANT SELECT ON s.ev, s.ev_1 TO {app};
GRANT USAGE ON SEQUENCE s.loose TO {app};
REVOKE EXECUTE ON FUNCTION s.f(s.positive) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION s.f(s.positive) TO {app};
REVOKE EXECUTE ON PROCEDURE s.p() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION s.total(int) FROM PUBLIC;
REVOKE USAGE ON TYPE s.mood FROM PUBLIC;
GRANT USAGE ON TYPE s.mood TO {app};
GRANT USAGE ON DOMAIN s.positive TO {app};
REVOKE USAGE ON TYPE s.span FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA s GRANT SELECT ON TABLES TO {app};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA s GRANT USAGE ON SEQUENCES TO {app};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA s GRANT EXECUTE ON FUNCTIONS TO {app};
ALTER TABLE s.t ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY mine ON s.t AS RESTRICTIVE FOR UPDATE TO {app}, PUBLIC USING (owner_id = s.f(1)) WITH CHECK (owner_id > 0);
CREATE POLICY see ON s.t FOR SELECT USING (true);
CREATE TRIGGER t_keep BEFORE INSERT ON s.t FOR EACH ROW EXECUTE FUNCTION s.trg();
CREATE TRIGGER t_off BEFORE UPDATE ON s.t FOR EACH ROW EXECUTE FUNCTION s.trg();
ALTER TABLE s.t DISABLE TRIGGER t_off;
CREATE TRIGGER t_always AFTER DELETE ON s.t FOR EACH ROW EXECUTE FUNCTION s.trg();
ALTER TABLE s.t ENABLE ALWAYS TRIGGER t_always;
COMMENT ON TABLE s.t IS 'the t';
COMMENT ON COLUMN s.t.secret IS 'it''s secret';
COMMENT ON INDEX s.t_owner IS 'by owner';
COMMENT ON CONSTRAINT t_pkey ON s.t IS 'the key';
COMMENT ON FUNCTION s.f(s.positive) IS 'f';
COMMENT ON TRIGGER t_keep ON s.t IS 'keeps';
COMMENT ON POLICY see ON s.t IS 'sees';
COMMENT ON TYPE s.mood IS 'moods';
COMMENT ON DOMAIN s.positive IS 'above 0';
COMMENT ON AGGREGATE s.total(int) IS 'sum';
COMMENT ON PROCEDURE s.p() IS 'p'`

// Carry makes a copy built by the same DDL carry everything the source
// was given by hand, for objects of every kind (names quoted as hostile as
// they come), and running it again changes nothing. A copy's difference
// is named by Compare.
func TestCarryEverythingAUserReliesOn(t *testing.T) {
	t.Parallel()
	server := pgtest.Servers(t, 1)[0]
	src, dst := pgtest.Pool(t, pgtest.NewDB(t, server)), pgtest.Pool(t, pgtest.NewDB(t, server))
	c := ctx(t)
	n := roleCounter.Add(1)
	app, owner := fmt.Sprintf(`app "%d"`, n), fmt.Sprintf("grants_owner_%d", n)
	for _, r := range []string{app, owner} {
		q := pgx.Identifier{r}.Sanitize()
		_, err := src.Exec(c, `CREATE ROLE `+q)
		require.NoError(t, err)
		t.Cleanup(func() {
			for _, p := range []*pgxpool.Pool{src, dst} {
				p.Exec(context.Background(), `DROP OWNED BY `+q)
			}
			src.Exec(context.Background(), `DROP ROLE `+q)
		})
	}
	for _, p := range []*pgxpool.Pool{src, dst} {
		_, err := p.Exec(c, schemaDDL)
		require.NoError(t, err)
	}
	_, err := src.Exec(c, strings.NewReplacer("{app}", pgx.Identifier{app}.Sanitize(), "{owner}", pgx.Identifier{owner}.Sanitize()).Replace(handDDL))
	require.NoError(t, err)

	tk := Toolkit{Objects: map[string]bool{}, Triggers: map[string]bool{}}
	want, err := ReadDB(c, src, "s", tk)
	require.NoError(t, err)
	require.Contains(t, want.Comments, "INDEX s.t_owner")
	before, err := ReadDB(c, dst, "s", tk)
	require.NoError(t, err)
	diff := Compare(want, before)
	require.NotEmpty(t, diff)
	require.Contains(t, strings.Join(diff, "\n"), `table t: owner postgres, not `+owner)
	require.Contains(t, strings.Join(diff, "\n"), `column t.secret: lacks `+app+`:SELECT `+app+`:UPDATE`)

	// An index the target lacks (made by hand on the source): its comment
	// is left out, the rest carried.
	_, err = src.Exec(c, `CREATE INDEX by_hand ON s.t (m); COMMENT ON INDEX s.by_hand IS 'by hand'`)
	require.NoError(t, err)
	want, err = ReadDB(c, src, "s", tk)
	require.NoError(t, err)
	delete(want.Comments, "INDEX s.by_hand")
	for range 2 {
		full, err := ReadDB(c, src, "s", tk)
		require.NoError(t, err)
		require.Contains(t, full.Comments, "INDEX s.by_hand")
		require.NoError(t, pgx.BeginFunc(c, dst, func(tx pgx.Tx) error { return Carry(c, tx, full, tk) }))
		got, err := ReadDB(c, dst, "s", tk)
		require.NoError(t, err)
		require.Empty(t, Compare(want, got))
		require.Equal(t, want.Objects, got.Objects)
		require.Equal(t, want.Defaults, got.Defaults)
		require.Equal(t, want.RLS, got.RLS)
		require.Equal(t, want.Policies, got.Policies)
		require.Equal(t, want.Triggers, got.Triggers)
		require.Equal(t, want.Comments, got.Comments)
	}
	// What Carry did, PostgreSQL enforces: the application may read t
	// (through the policy) and insert, and may not call the procedure.
	var canInsert, canExec bool
	require.NoError(t, dst.QueryRow(c, `SELECT has_table_privilege($1, 's.t', 'INSERT'), has_function_privilege($1, 's.p()', 'EXECUTE')`, app).
		Scan(&canInsert, &canExec))
	require.True(t, canInsert)
	require.False(t, canExec)

	// A privilege taken from the copy is named.
	_, err = dst.Exec(c, `REVOKE INSERT ON s."x""; DROP TABLE s.t; --" FROM `+pgx.Identifier{app}.Sanitize())
	require.NoError(t, err)
	got, err := ReadDB(c, dst, "s", tk)
	require.NoError(t, err)
	require.Equal(t, []string{`table "x""; DROP TABLE s.t; --": lacks ` + app + `:INSERT`}, Compare(want, got))
}

// A host without a role the grants name refuses, naming it, and changes
// nothing.
func TestCarryRefusesMissingRole(t *testing.T) {
	t.Parallel()
	server := pgtest.Servers(t, 1)[0]
	src, dst := pgtest.Pool(t, pgtest.NewDB(t, server)), pgtest.Pool(t, pgtest.NewDB(t, server))
	c := ctx(t)
	for _, p := range []*pgxpool.Pool{src, dst} {
		_, err := p.Exec(c, `CREATE SCHEMA s; CREATE TABLE s.t (id int)`)
		require.NoError(t, err)
	}
	want, err := ReadDB(c, src, "s", Toolkit{})
	require.NoError(t, err)
	want.Objects["TABLE t"].ACL = append(want.Objects["TABLE t"].ACL, Entry{Grantee: "no such role", Privilege: "SELECT"})
	err = pgx.BeginFunc(c, dst, func(tx pgx.Tx) error { return Carry(c, tx, want, Toolkit{}) })
	require.ErrorIs(t, err, ErrMissingRole)
	require.ErrorContains(t, err, "no such role")
}
