package shardmgr

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Ident returns table name in the shard's schema as a pgx.Identifier,
// {schema, name}: what pgx takes where it names a table (tx.CopyFrom), and
// quoted safely by its Sanitize. Any name is safe to pass, whatever it holds.
func (s Shard) Ident(name string) pgx.Identifier { return pgx.Identifier{s.Schema, name} }

// SQL fills in a query template for the shard: each {name} becomes the
// quoted, schema-qualified name of table name in the shard's schema, so
//
//	s.SQL("INSERT INTO {likes} (user_id) VALUES ($1)")
//
// is `INSERT INTO "shard_0005"."likes" (user_id) VALUES ($1)` on shard 5.
// A name is quoted as an identifier whatever it holds (quotes, semicolons,
// spaces), so it can never end the identifier; values still go in as
// parameters ($1), never into the template.
//
// Braces inside string literals ('{"a":1}'), quoted identifiers, dollar
// quotes ($$...$$) and comments are left alone. A malformed template is
// refused with an error wrapping ErrSQLTemplate and no query: an
// unbalanced brace, an empty name, a name with surrounding spaces or a NUL
// byte, an unterminated literal, quoted identifier, dollar quote or
// comment. A name that holds a brace cannot be written in a template: use
// Ident or Table for it.
func (s Shard) SQL(template string) (string, error) {
	t := template
	var b strings.Builder
	last := 0 // start of the text not yet copied
	for i := 0; i < len(t); {
		c := t[i]
		switch {
		case c == '\'':
			// E'...' takes backslash escapes; '...' does not (the router's
			// sessions pin standard_conforming_strings on).
			esc := i > 0 && (t[i-1] == 'E' || t[i-1] == 'e') && (i < 2 || !identByte(t[i-2]))
			j, ok := endQuoted(t, i+1, '\'', esc)
			if !ok {
				return "", templateErr(template, i, "unterminated string literal")
			}
			i = j
		case c == '"':
			j, ok := endQuoted(t, i+1, '"', false)
			if !ok {
				return "", templateErr(template, i, "unterminated quoted identifier")
			}
			i = j
		case c == '-' && strings.HasPrefix(t[i:], "--"):
			if j := strings.IndexByte(t[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(t)
			}
		case c == '/' && strings.HasPrefix(t[i:], "/*"):
			j, ok := endComment(t, i)
			if !ok {
				return "", templateErr(template, i, "unterminated comment")
			}
			i = j
		case c == '$' && (i == 0 || !identByte(t[i-1])):
			j, ok, quoted := endDollar(t, i)
			if quoted && !ok {
				return "", templateErr(template, i, "unterminated dollar quote")
			}
			i = j
		case c == '{':
			end := strings.IndexAny(t[i+1:], "{}")
			if end < 0 || t[i+1+end] == '{' {
				return "", templateErr(template, i, "{ without }")
			}
			name := t[i+1 : i+1+end]
			switch {
			case name == "":
				return "", templateErr(template, i, "empty name {}")
			case strings.TrimSpace(name) != name:
				return "", templateErr(template, i, fmt.Sprintf("name %q has surrounding spaces", name))
			case strings.IndexByte(name, 0) >= 0:
				return "", templateErr(template, i, "name holds a NUL byte")
			}
			b.WriteString(t[last:i])
			b.WriteString(s.Ident(name).Sanitize())
			i += end + 2
			last = i
		case c == '}':
			return "", templateErr(template, i, "} without {")
		default:
			i++
		}
	}
	b.WriteString(t[last:])
	return b.String(), nil
}

func templateErr(template string, at int, what string) error {
	return fmt.Errorf("%w: %s at byte %d of %s", ErrSQLTemplate, what, at, quoteInput(template))
}

// identByte reports whether c may be part of an SQL identifier or keyword
// (letters of any script, digits, _ and $).
func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// endQuoted returns the index after the quote q that closes the literal or
// identifier whose text starts at i; a doubled q is one q inside it.
func endQuoted(t string, i int, q byte, backslash bool) (int, bool) {
	for ; i < len(t); i++ {
		switch {
		case backslash && t[i] == '\\':
			i++
		case t[i] == q:
			if i+1 < len(t) && t[i+1] == q {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return len(t), false
}

// endComment returns the index after the block comment starting at i;
// PostgreSQL's block comments nest.
func endComment(t string, i int) (int, bool) {
	depth := 0
	for i < len(t) {
		switch {
		case strings.HasPrefix(t[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(t[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return len(t), false
}

// endDollar reads at t[i] == '$': a parameter ($1) or a lone $ moves on one
// byte; a dollar quote ($$...$$, $tag$...$tag$) returns the index after its
// closing tag, with quoted set.
func endDollar(t string, i int) (next int, ok, quoted bool) {
	k := i + 1
	if k < len(t) && '0' <= t[k] && t[k] <= '9' {
		return k, true, false // a parameter
	}
	for k < len(t) && t[k] != '$' && identByte(t[k]) {
		k++
	}
	if k >= len(t) || t[k] != '$' {
		return i + 1, true, false
	}
	tag := t[i : k+1]
	end := strings.Index(t[k+1:], tag)
	if end < 0 {
		return len(t), false, true
	}
	return k + 1 + end + len(tag), true, true
}
