package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartStandby makes a streaming standby of primary, as an operator would
// with pg_basebackup -R (a base backup with the WAL streamed, and
// primary_conninfo and standby.signal written), and starts it on a free
// loopback port with the primary's settings. It shares the primary's
// system identifier; Promote makes it a primary. Stop it like any server.
func StartStandby(ctx context.Context, primary *Server) (*Server, error) {
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shardid-pg-standby-")
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	s := &Server{Dir: dir, bin: primary.bin, cred: cred, opts: primary.opts, logPath: filepath.Join(dir, "server.log")}
	s.opts.OwnSystemID = false
	if err := s.chown(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := s.command(ctx, "pg_basebackup", "-D", filepath.Join(dir, "data"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port),
		"-U", "postgres", "-R", "-X", "stream", "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("localpg: pg_basebackup from port %d: %v: %s", primary.Port, err, out)
	}
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = s.start(ctx)
		if err == nil {
			return s, nil
		}
		if attempt >= 3 || !strings.Contains(s.logTail(), "could not bind") {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

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
