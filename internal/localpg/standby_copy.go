package localpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// copyBaseBackup makes a base backup of s into data without pg_basebackup,
// which a bundle of another major (SHARDID_PG_BIN) lacks: the data
// directory is copied between pg_backup_start and pg_backup_stop
// (pg_start_backup and pg_stop_backup on 14) in one session, the backup
// label pg_backup_stop returns is written into the copy, and the copy is
// made a standby of s (standby.signal, primary_conninfo), as
// pg_basebackup -R would. PostgreSQL documents this as the low-level
// base backup ("Making a Base Backup Using the Low Level API").
func (s *Server) copyBaseBackup(ctx context.Context, data string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("base backup of port %d: %w", s.Port, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		return fmt.Errorf("base backup of port %d: %w", s.Port, err)
	}
	start, stop := `SELECT pg_catalog.pg_backup_start('localpg standby', true)`,
		`SELECT labelfile, spcmapfile FROM pg_catalog.pg_backup_stop(false)`
	if version < 150000 {
		start, stop = `SELECT pg_catalog.pg_start_backup('localpg standby', true, false)`,
			`SELECT labelfile, spcmapfile FROM pg_catalog.pg_stop_backup(false, false)`
	}
	if _, err := conn.Exec(ctx, start); err != nil {
		return fmt.Errorf("base backup of port %d: start: %w", s.Port, err)
	}
	copyErr := copyDataDir(filepath.Join(s.Dir, "data"), data)
	var label, spcmap string
	if err := conn.QueryRow(ctx, stop).Scan(&label, &spcmap); err != nil {
		return fmt.Errorf("base backup of port %d: stop: %w", s.Port, err)
	}
	if copyErr != nil {
		return fmt.Errorf("base backup of port %d: copy: %w", s.Port, copyErr)
	}
	files := map[string]string{
		"backup_label":   label,
		"standby.signal": "",
	}
	if spcmap != "" {
		files["tablespace_map"] = spcmap
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(data, name), []byte(text), 0o600); err != nil {
			return fmt.Errorf("base backup of port %d: %w", s.Port, err)
		}
	}
	auto, err := os.OpenFile(filepath.Join(data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("base backup of port %d: %w", s.Port, err)
	}
	_, err = fmt.Fprintf(auto, "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres'\n", strconv.Itoa(s.Port))
	if cerr := auto.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("base backup of port %d: %w", s.Port, err)
	}
	return s.chown(data)
}

// skipInBackup are what pg_basebackup leaves out of a base backup: the
// running server's own files, and directories whose contents are
// rebuilt at start (their directories are kept, empty).
var (
	skipFiles    = map[string]bool{"postmaster.pid": true, "postmaster.opts": true, "backup_label": true, "tablespace_map": true, "standby.signal": true}
	emptiedDirs  = map[string]bool{"pg_replslot": true, "pg_dynshmem": true, "pg_notify": true, "pg_serial": true, "pg_snapshots": true, "pg_stat_tmp": true, "pg_subtrans": true}
	errVanishing = errors.New("vanished")
)

// copyDataDir copies a running server's data directory: files that
// vanish while it is copied (a server removes temporary files and old
// WAL) are left out, as pg_basebackup does.
func copyDataDir(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if filepath.Dir(rel) != "." && emptiedDirs[filepath.Dir(rel)] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		if filepath.Dir(rel) == "." && skipFiles[rel] {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := copyFile(p, dst); err != nil && !errors.Is(err, errVanishing) {
			return err
		}
		return nil
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if errors.Is(err, fs.ErrNotExist) {
		return errVanishing
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
