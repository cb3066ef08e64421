package genbench

import (
	"context"

	"github.com/shardid/shardid/internal/localpg"
)

// Scratch starts a throwaway local PostgreSQL server (the system's
// binaries, a port the kernel chose) with one database, bench, for the
// benches run without a server of their own (`shardid bench` and
// `shardid bench schemes` without --dsn). stop stops the server and
// removes its data and the cached initdb templates.
func Scratch(ctx context.Context) (dsn string, stop func(), err error) {
	server, err := localpg.Start(ctx, localpg.Options{})
	if err != nil {
		return "", nil, err
	}
	stop = func() {
		_ = server.Stop()
		localpg.RemoveTemplates()
	}
	if dsn, err = server.CreateDatabase(ctx, "bench"); err != nil {
		stop()
		return "", nil, err
	}
	return dsn, stop, nil
}
