package pg

import (
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// envPassword is a password that is a reference to an environment
// variable, ${VAR} (quoted or not): no secret. It stays, so that a router
// reading DSNs from the catalog (shardmgr.WithLookupEnv) still finds it.
var envPassword = regexp.MustCompile(`^'?\$\{[A-Za-z_][A-Za-z0-9_]*\}'?$`)

// StripPassword returns dsn without its password (and sslpassword), in
// the URL form (postgres://user:secret@host/db?password=secret) and the
// key=value form (host=db1 password='secret'), leaving everything else as
// written. It reads dsn the way pgconn (and libpq) split it, but reads
// the text only: no environment, no passfile, no defaults, unlike
// pgconn.ParseConfig. A password that is a ${VAR} reference stays.
//
// A DSN that does not parse (a URL that net/url refuses, keyword/value
// text that does not split into pairs) comes back as Unparsable: where
// its password ends is anyone's guess, so none of it is shown.
//
// The catalog records host DSNs through it, so that the roles that read
// the catalog (a router's) see no secret: the password comes from the
// cluster file, PGPASSWORD or a passfile when connecting.
func StripPassword(dsn string) string {
	for _, scheme := range []string{"postgresql://", "postgres://"} {
		if rest, ok := strings.CutPrefix(dsn, scheme); ok {
			// ${VAR} is not URL syntax: parse as if each were expanded.
			if _, err := url.Parse(scheme + envRef.ReplaceAllString(rest, "x")); err != nil {
				return Unparsable
			}
			return scheme + stripURL(rest)
		}
	}
	return stripKeywordValue(dsn)
}

// Unparsable stands for a DSN that does not parse wherever one is shown.
const Unparsable = "(a DSN that does not parse)"

// envRef is a ${VAR} reference anywhere in a DSN.
var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// isPasswordKey reports a setting that holds a secret.
func isPasswordKey(key string) bool { return key == "password" || key == "sslpassword" }

// stripURL strips what follows postgres://: the password of the userinfo
// (up to the first '@' that no '/' precedes, as libpq reads it) and the
// password parameters of the query.
func stripURL(p string) string {
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		if user, pass, ok := strings.Cut(p[:i], ":"); ok && !envPassword.MatchString(pass) {
			p = user + p[i:]
		}
	}
	start := 0
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		start = i + 1
	}
	q := strings.IndexByte(p[start:], '?')
	if q < 0 {
		return p
	}
	q += start
	params := strings.Split(p[q+1:], "&")
	kept := params[:0]
	for _, kv := range params {
		key, val, _ := strings.Cut(kv, "=")
		if isPasswordKey(strings.TrimSpace(percentDecode(key))) && !envPassword.MatchString(val) {
			continue
		}
		kept = append(kept, kv)
	}
	if len(kept) == len(params) {
		return p
	}
	if len(kept) == 0 {
		return p[:q]
	}
	return p[:q+1] + strings.Join(kept, "&")
}

// percentDecode decodes %XX escapes, leaving a malformed one as written.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

const kvSpace = " \t\n\r\v\f"

// stripKeywordValue drops the password pairs of a key=value DSN, split
// as pgconn splits it (a key up to '=', a value up to a blank or between
// quotes, backslash escapes); the pairs kept are joined by one space. A
// DSN that has no password pair comes back as is, one that does not
// parse as Unparsable.
func stripKeywordValue(dsn string) string {
	var kept []string
	removed := false
	s := strings.TrimLeft(dsn, kvSpace)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return Unparsable
		}
		key := strings.Trim(s[:eq], kvSpace)
		rest := strings.TrimLeft(s[eq+1:], kvSpace)
		end := 0
		switch {
		case rest == "":
		case rest[0] != '\'':
			for ; end < len(rest) && !strings.ContainsRune(kvSpace, rune(rest[end])); end++ {
				if rest[end] == '\\' {
					end++
					if end >= len(rest) {
						end = len(rest)
						break
					}
				}
			}
		default:
			end = 1
			for ; end < len(rest) && rest[end] != '\''; end++ {
				if rest[end] == '\\' {
					end++
				}
			}
			if end >= len(rest) {
				return Unparsable // unterminated quote
			}
			end++ // the closing quote
		}
		pair := s[:len(s)-len(rest)+end]
		if isPasswordKey(key) && !envPassword.MatchString(rest[:end]) {
			removed = true
		} else {
			kept = append(kept, strings.TrimLeft(pair, kvSpace))
		}
		s = strings.TrimLeft(rest[end:], kvSpace)
	}
	if !removed {
		return dsn
	}
	return strings.Join(kept, " ")
}

// Servers names the server or servers a parsed DSN reaches, host:port,
// in a stable form: a DSN that names several (host=a,b port=1,2, or
// postgres://a:1,b:2/db) lists each once, sorted, so that two spellings
// of one set of servers name it alike. Connections to it may land on any
// of them (the first that suits target_session_attrs).
func Servers(pc *pgconn.Config) string {
	seen := map[string]bool{}
	var out []string
	add := func(host string, port uint16) {
		s := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(pc.Host, pc.Port)
	for _, f := range pc.Fallbacks {
		add(f.Host, f.Port)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
