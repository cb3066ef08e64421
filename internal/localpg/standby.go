package localpg

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// Promote ends a standby's recovery (pg_promote) and waits, at most
// timeout, until it accepts writes.
func (s *Server) Promote(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("localpg: promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	secs := max(int(timeout.Seconds()), 1)
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_promote(true, $1)`, secs).Scan(&ok); err != nil {
		return fmt.Errorf("localpg: promote: %w", err)
	}
	if !ok {
		return fmt.Errorf("localpg: promote: the server on port %d did not leave recovery within %s", s.Port, timeout)
	}
	return nil
}

// initdbAlone runs initdb into this server's data directory (Options.OwnSystemID).
func (s *Server) initdbAlone(ctx context.Context) error {
	out, err := s.command(ctx, "initdb", "-D", filepath.Join(s.Dir, "data"), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync").CombinedOutput()
	if err != nil {
		return errors.Join(fmt.Errorf("localpg: initdb failed: %v", err), errors.New(string(out)))
	}
	return nil
}
