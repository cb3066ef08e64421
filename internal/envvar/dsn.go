package envvar

import (
	"errors"
	"fmt"
	"strings"
)

// ErrDSNStructure is returned by ExpandDSN for a value that would change
// which server a URL DSN names: a ${VAR} in its host part whose value
// holds '@', '/', '?' or '#'.
var ErrDSNStructure = errors.New("a ${VAR} value would change the DSN's structure")

// ExpandDSN is Expand for a connection string: each ${VAR}'s value is
// taken literally, as the text it stands for, not as DSN syntax. In a URL
// DSN (postgres://, postgresql://) a value in the user info, the database
// or the query is percent-encoded, so that a password holding '@', ':' or
// '/' stays the password; a value in the host part that holds '@', '/',
// '?' or '#' is refused (ErrDSNStructure, naming the variable, never its
// value). In a keyword/value DSN a value is escaped for where it stands
// (inside quotes or not). A ${VAR} that stands where the structure is (the
// whole DSN, a keyword, before the scheme) is expanded as written, as
// Expand does: DATABASE_URL=postgres://... keeps working.
func ExpandDSN(dsn string, lookup func(string) (string, bool)) (string, []string, error) {
	var missing []string
	value := func(name string) string {
		if lookup != nil {
			if v, ok := lookup(name); ok {
				return v
			}
		}
		missing = append(missing, name)
		return ""
	}
	var out string
	var err error
	if rest, ok := cutScheme(dsn); ok {
		out, err = expandURL(dsn[:len(dsn)-len(rest)], rest, value)
	} else {
		out = expandKeywordValue(dsn, value)
	}
	if err != nil {
		return "", missing, err
	}
	return out, missing, nil
}

func cutScheme(dsn string) (string, bool) {
	for _, scheme := range []string{"postgresql://", "postgres://"} {
		if rest, ok := strings.CutPrefix(dsn, scheme); ok {
			return rest, true
		}
	}
	return "", false
}

// expandRefs replaces each ${VAR} of s with enc(value).
func expandRefs(s string, value func(string) string, enc func(name, v string) (string, error)) (string, error) {
	var err error
	out := ref.ReplaceAllStringFunc(s, func(r string) string {
		name := r[2 : len(r)-1]
		v, e := enc(name, value(name))
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	return out, err
}

// expandURL expands rest, what follows scheme. The parts are found in the
// text as written (a ${VAR} holds none of '@', '/', '?'): the user info up
// to the first '@' that no '/' precedes (as libpq reads it), the hosts up
// to '/' or '?', the database up to '?', the query.
func expandURL(scheme, rest string, value func(string) string) (string, error) {
	userinfo, hosts, tail := "", rest, ""
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		userinfo, hosts = rest[:i+1], rest[i+1:]
	}
	if i := strings.IndexAny(hosts, "/?"); i >= 0 {
		hosts, tail = hosts[:i], hosts[i:]
	}
	encode := func(_, v string) (string, error) { return percentEncode(v), nil }
	hostValue := func(name, v string) (string, error) {
		if strings.ContainsAny(v, "@/?#") {
			return "", fmt.Errorf("%w: ${%s} in the host part holds '@', '/', '?' or '#' (a password belongs in the user info)", ErrDSNStructure, name)
		}
		return v, nil
	}
	var b strings.Builder
	b.WriteString(scheme)
	for _, part := range []struct {
		s   string
		enc func(string, string) (string, error)
	}{{userinfo, encode}, {hosts, hostValue}, {tail, encode}} {
		s, err := expandRefs(part.s, value, part.enc)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// percentEncode encodes every byte but the unreserved ones (RFC 3986), so
// that the value reads back as written from user info, path or query.
func percentEncode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

const blanks = " \t\n\r\v\f"

// expandKeywordValue expands a keyword/value DSN, reading it as pgconn
// and libpq do (a keyword up to '=', a value up to a blank or between
// quotes, backslash escapes). A value in quotes gets its '\' and '\”
// escaped; one outside quotes its blanks too. What does not read as
// keyword/value (text before the first '=': a keyword, or a whole DSN
// from one variable) is expanded as written.
func expandKeywordValue(s string, value func(string) string) string {
	raw := func(_, v string) (string, error) { return v, nil }
	quoted := func(_, v string) (string, error) { return escape(v, `\'`), nil }
	bare := func(_, v string) (string, error) { return escape(v, `\'`+blanks), nil }
	var b strings.Builder
	emit := func(text string, enc func(string, string) (string, error)) {
		out, _ := expandRefs(text, value, enc)
		b.WriteString(out)
	}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			emit(s, raw)
			break
		}
		emit(s[:eq+1], raw)
		s = s[eq+1:]
		lead := len(s) - len(strings.TrimLeft(s, blanks))
		b.WriteString(s[:lead])
		s = s[lead:]
		end := 0
		if s != "" && s[0] == '\'' {
			for end = 1; end < len(s) && s[end] != '\''; end++ {
				if s[end] == '\\' {
					end++
				}
			}
			if end >= len(s) { // unterminated: pgconn will say so
				emit(s, raw)
				break
			}
			b.WriteByte('\'')
			emit(s[1:end], quoted)
			b.WriteByte('\'')
			end++
		} else {
			for ; end < len(s) && !strings.ContainsRune(blanks, rune(s[end])); end++ {
				if s[end] == '\\' {
					end++
				}
			}
			end = min(end, len(s))
			emit(s[:end], bare)
		}
		s = s[end:]
		lead = len(s) - len(strings.TrimLeft(s, blanks))
		b.WriteString(s[:lead])
		s = s[lead:]
	}
	return b.String()
}

// escape puts a backslash before each byte of s found in special.
func escape(s, special string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
