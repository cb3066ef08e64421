package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shardid/shardid/internal/localpg"
	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
	"github.com/shardid/shardid/shardmgr/install"
)

// RemoveResult is what RemoveHost did.
type RemoveResult struct {
	Name string `json:"name"`
	// CatalogChanges are Init's changes to the catalog ("remove host
	// pg4"), none when the catalog did not know the host.
	CatalogChanges []string `json:"catalog_changes"`
	Stopped        bool     `json:"stopped"`
	// Removed is the server's directory, data and log, now gone.
	Removed string `json:"removed"`
}

// RemoveHost takes server name out of the local cluster, the reverse of
// AddHost: out of the catalog (Init with the host left out of the file,
// which refuses while unfinished moves or retired copies involve it), out
// of the cluster file, then stops the server and removes its directory.
// A host that still holds shards is refused before anything changes,
// with an error wrapping install.ErrHostInUse that names its shards.
func RemoveHost(ctx context.Context, opts Options, name string) (*RemoveResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	st, err := readState(opts.Dir)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(st.Names, name) {
		return nil, fmt.Errorf("no server %s in the local cluster in %s (it has %s)", name, opts.Dir, strings.Join(st.Names, ", "))
	}
	if len(st.Names) == 1 {
		return nil, fmt.Errorf("%s is the local cluster's only server (shardid local down --purge removes the cluster)", name)
	}
	res := &RemoveResult{Name: name}
	cfg, err := shardmgr.LoadConfig(st.Config)
	if err != nil {
		return nil, err
	}
	if _, inFile := cfg.Host(name); inFile {
		c, err := cluster.Open(ctx, cfg, quietHandle)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		status, err := install.ClusterStatus(ctx, c)
		if err != nil {
			return nil, err
		}
		for _, h := range status.Hosts {
			if h.Name == name && len(h.Shards) > 0 {
				return nil, fmt.Errorf("%w: host %s holds %d shards: %s", install.ErrHostInUse, name, len(h.Shards), shardmgr.FormatShardList(h.Shards))
			}
		}
		// The catalog first: Init with the host left out removes it, or
		// refuses (a move involving it unfinished, a retired copy kept
		// there) and nothing has changed.
		without := *cfg
		without.Hosts = slices.DeleteFunc(slices.Clone(cfg.Hosts), func(h shardmgr.Host) bool { return h.Name == name })
		cw, err := cluster.Open(ctx, &without, quietHandle)
		if err != nil {
			return nil, err
		}
		defer cw.Close()
		ir, err := install.Init(ctx, cw, install.InitOptions{Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		res.CatalogChanges = ir.CatalogChanges
		if err := removeHostFromFile(st.Config, name); err != nil {
			return res, err
		}
	}
	dir := filepath.Join(opts.Dir, name)
	s, err := localpg.Open(dir, opts.pgOptions())
	switch {
	case errors.Is(err, localpg.ErrNoServer):
	case err != nil:
		return res, fmt.Errorf("%s: %w", name, err)
	case s.Running():
		if err := s.Halt(); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		res.Stopped = true
	}
	st.Names = slices.DeleteFunc(st.Names, func(n string) bool { return n == name })
	if err := writeState(opts.Dir, st); err != nil {
		return res, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return res, err
	}
	res.Removed = dir
	return res, nil
}
