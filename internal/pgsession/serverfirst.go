package pgsession

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ServerFirst puts the server's own reason first in a failed connection's
// error, on one line: pgconn lists every attempt in order, so with
// sslmode=prefer (libpq's default, and pgx's) a refusal reads "tls error:
// server refused TLS connection" before the server's FATAL (permission
// denied for database, no such role) on a later line. errors.Is and As
// still see err; any other error, and one whose reason is first already,
// comes back as is.
func ServerFirst(err error) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var sf *serverFirstError
	if !errors.As(err, &ce) || !errors.As(err, &pe) || errors.As(err, &sf) {
		return err
	}
	return &serverFirstError{reason: pe, err: err}
}

type serverFirstError struct {
	reason *pgconn.PgError
	err    error
}

func (e *serverFirstError) Error() string {
	return fmt.Sprintf("%s: %s (SQLSTATE %s); %s", e.reason.Severity, e.reason.Message, e.reason.Code,
		strings.Join(strings.Fields(e.err.Error()), " "))
}

func (e *serverFirstError) Unwrap() error { return e.err }
