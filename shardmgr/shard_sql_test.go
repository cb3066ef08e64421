package shardmgr_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/shardid/shardid/shardmgr"
)

func TestShardSQL(t *testing.T) {
	t.Parallel()
	s := shardmgr.Shard{ID: 5, Schema: "shard_0005"}
	for _, tc := range []struct{ template, want string }{
		{"INSERT INTO {likes} (user_id) VALUES ($1)", `INSERT INTO "shard_0005"."likes" (user_id) VALUES ($1)`},
		{"SELECT * FROM {likes} l JOIN {posts} p ON p.id = l.post_id", `SELECT * FROM "shard_0005"."likes" l JOIN "shard_0005"."posts" p ON p.id = l.post_id`},
		{"SELECT 1", "SELECT 1"},
		{"", ""},
		{"{Likes}", `"shard_0005"."Likes"`}, // case kept: it is quoted
		// A hostile name stays one identifier.
		{`SELECT * FROM {likes"; DROP TABLE users; --}`, `SELECT * FROM "shard_0005"."likes""; DROP TABLE users; --"`},
		{`{a'b}`, `"shard_0005"."a'b"`},
		// Braces inside literals, quoted identifiers, dollar quotes and
		// comments are not names.
		{`UPDATE {t} SET doc = '{"a": {"b": 1}}'::jsonb, tags = '{x,y}'`, `UPDATE "shard_0005"."t" SET doc = '{"a": {"b": 1}}'::jsonb, tags = '{x,y}'`},
		{`SELECT 'it''s {x}' FROM {t}`, `SELECT 'it''s {x}' FROM "shard_0005"."t"`},
		{`SELECT E'\'{x}' FROM {t}`, `SELECT E'\'{x}' FROM "shard_0005"."t"`},
		{`SELECT "{col}" FROM {t}`, `SELECT "{col}" FROM "shard_0005"."t"`},
		{"SELECT $${x}$$, $f${y}$f$, $1 FROM {t}", `SELECT $${x}$$, $f${y}$f$, $1 FROM "shard_0005"."t"`},
		{"SELECT 1 -- {not} a name\nFROM {t}", "SELECT 1 -- {not} a name\nFROM \"shard_0005\".\"t\""},
		{"SELECT /* {a} /* {b} */ {c} */ 1 FROM {t}", `SELECT /* {a} /* {b} */ {c} */ 1 FROM "shard_0005"."t"`},
		{"SELECT a$b FROM {t}", `SELECT a$b FROM "shard_0005"."t"`},
	} {
		got, err := s.SQL(tc.template)
		require.NoError(t, err, tc.template)
		require.Equal(t, tc.want, got, tc.template)
	}

	for _, tc := range []struct{ template, err string }{
		{"INSERT INTO {likes (user_id) VALUES ($1)", "{ without } at byte 12"},
		{"SELECT {a{b}}", "{ without } at byte 7"},
		{"SELECT a} FROM {t}", "} without { at byte 8"},
		{"SELECT * FROM {}", "empty name {}"},
		{"SELECT * FROM { likes}", `name " likes" has surrounding spaces`},
		{"SELECT * FROM {li\x00kes}", "NUL byte"},
		{"SELECT '{x} FROM {t}", "unterminated string literal at byte 7"},
		{`SELECT E'\' FROM {t}`, "unterminated string literal"},
		{`SELECT "{x} FROM {t}`, "unterminated quoted identifier"},
		{"SELECT $q${x} FROM {t}", "unterminated dollar quote"},
		{"SELECT /* /* */ {t}", "unterminated comment"},
	} {
		got, err := s.SQL(tc.template)
		require.ErrorIs(t, err, shardmgr.ErrSQLTemplate, tc.template)
		require.ErrorContains(t, err, tc.err, tc.template)
		require.Empty(t, got)
	}
	_, err := s.SQL("{" + strings.Repeat("x", 500))
	require.ErrorContains(t, err, "... (501 bytes)", "a long template is cut in the error line")

	require.Equal(t, pgx.Identifier{"shard_0005", "likes"}, s.Ident("likes"))
	require.Equal(t, `"shard_0005"."a""; DROP TABLE x; --"`, s.Ident(`a"; DROP TABLE x; --`).Sanitize())
}

// On a real server: a hostile table name made by SQL or Ident names one
// table in the shard's schema and nothing else runs; Ident feeds CopyFrom.
func TestShardSQLAndIdentOnPostgres(t *testing.T) {
	t.Parallel()
	_, r := postsCluster(t, 2)
	hostile := `x"; DROP TABLE posts; --`
	require.NotContains(t, hostile, "}")
	err := r.Tx(ctx(t), 1, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		create, err := s.SQL("CREATE TABLE {" + hostile + "} (id bigint PRIMARY KEY DEFAULT " + s.NextID() + ", note text)")
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, create); err != nil {
			return err
		}
		n, err := tx.CopyFrom(ctx, s.Ident(hostile), []string{"note"}, pgx.CopyFromRows([][]any{{"a"}, {"b"}}))
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		_, err = tx.Exec(ctx, "INSERT INTO "+s.Ident(hostile).Sanitize()+" (note) VALUES ($1)", "c")
		return err
	})
	require.NoError(t, err)
	require.NoError(t, r.ReadTx(ctx(t), 1, func(ctx context.Context, tx pgx.Tx, s shardmgr.Shard) error {
		var tables []string
		rows, err := tx.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", s.Schema)
		require.NoError(t, err)
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"posts", hostile}, tables, "posts is still there; the hostile name is one table")
		q, err := s.SQL("SELECT string_agg(note, ',' ORDER BY id) FROM {" + hostile + "}")
		require.NoError(t, err)
		var notes string
		require.NoError(t, tx.QueryRow(ctx, q).Scan(&notes))
		require.Equal(t, "a,b,c", notes)
		return nil
	}))
}
