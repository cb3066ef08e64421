// Package pgsession fixes the session settings that every connection the
// toolkit opens relies on, whatever the server, database or role sets.
//
// The toolkit builds some SQL with inline literals where PostgreSQL takes
// no parameters (CREATE SUBSCRIPTION's conninfo, COMMENT, SET). How a
// literal reads depends on standard_conforming_strings, which a database
// or role may turn off (ALTER DATABASE ... SET); the settings here travel
// in the startup packet, which takes precedence over those.
package pgsession

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Params are the settings every session is opened with.
var Params = map[string]string{
	"standard_conforming_strings": "on",
}

// Pin sets Params in cfg's runtime parameters.
func Pin(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for k, v := range Params {
		cfg.RuntimeParams[k] = v
	}
}

// urlScheme is the scheme of text that reads as a URL.
var urlScheme = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9+.-]*)://`)

// CheckScheme refuses a DSN that reads as a URL of another scheme than
// postgres:// or postgresql://. pgconn takes such text for keyword/value
// settings ("postgress://h/db?sslmode" = "disable") and connects to the
// default Unix socket instead of saying so.
func CheckScheme(dsn string) error {
	m := urlScheme.FindStringSubmatch(dsn)
	if m == nil {
		return nil
	}
	switch m[1] {
	case "postgres", "postgresql":
		return nil
	}
	return fmt.Errorf("cannot parse the DSN: unknown URL scheme %q (want postgres:// or postgresql://)", m[1])
}

// ParseConfig is pgx.ParseConfig with Params pinned.
func ParseConfig(dsn string) (*pgx.ConnConfig, error) {
	if err := CheckScheme(dsn); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, RedactParseError(err)
	}
	Pin(&cfg.Config)
	return cfg, nil
}

// ParsePoolConfig is pgxpool.ParseConfig with Params pinned.
func ParsePoolConfig(dsn string) (*pgxpool.Config, error) {
	if err := CheckScheme(dsn); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, RedactParseError(err)
	}
	Pin(&cfg.ConnConfig.Config)
	return cfg, nil
}

// Connect opens one connection on dsn with Params pinned. A refusal
// leads with the server's reason (ServerFirst).
func Connect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, ServerFirst(err)
	}
	return conn, nil
}

// RedactParseError returns a DSN parse error that does not repeat the DSN.
// pgx's message quotes the DSN with a password=... pair masked, but not
// every spelling of it (a keyword/value DSN with "password = X" is quoted
// as written), so the DSN is left out altogether: the caller names which
// DSN it was. What is kept is pgx's reason: the wrapped error (a
// url.Error without its URL) or, when there is none, pgx's message.
func RedactParseError(err error) error {
	var pce *pgconn.ParseConfigError
	if err == nil || !errors.As(err, &pce) {
		return err
	}
	if inner := errors.Unwrap(pce); inner != nil {
		var ue *url.Error
		if errors.As(inner, &ue) {
			inner = ue.Err
		}
		return fmt.Errorf("cannot parse the DSN: %w", inner)
	}
	// Error() is "cannot parse `DSN`: msg"; pgx's messages hold no
	// backtick, so the last "`: " ends the DSN.
	msg := pce.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	} else {
		msg = "malformed"
	}
	return errors.New("cannot parse the DSN: " + msg)
}
