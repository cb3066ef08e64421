package console

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shardid/shardid/shardmgr"
	"github.com/shardid/shardid/shardmgr/cluster"
)

// The console's cluster handle follows the cluster file: a host added
// after the console started (host add, init) is in the catalog and the
// file, and a handle opened on the old file knows neither its DSN nor
// its pools. When the catalog's hosts change, or a page meets a host the
// handle does not know, the console rereads the file (Options.Reopen,
// validated as at startup) and serves from the new handle; a file that
// does not read keeps the last good handle, and the map says so.

// reloadEvery bounds how often the console rereads the cluster file for
// a host it does not know: a host in the catalog that the file truly
// lacks must not make every refresh read the file.
const reloadEvery = 5 * time.Second

// handle is one cluster handle the console serves from, counted while
// requests and actions use it: a handle replaced by a reread is closed
// when the last of them is done (an apply may run on it for hours).
type handle struct {
	c       *cluster.Cluster
	refs    int
	retired bool
	owned   bool // opened by the console (by a reread), so closed by it
}

// reloadState is what the last reread of the cluster file found.
type reloadState struct {
	hosts   []string  // the catalog's hosts when last compared
	tried   time.Time // the last reread
	err     string    // why the last reread failed, "" when it did not
	goodAt  time.Time // when the handle in use was read
	errPath string
}

// use returns the handle to serve from and the function that releases
// it.
func (s *Console) use() (*cluster.Cluster, func()) {
	s.hmu.Lock()
	h := s.cur
	h.refs++
	s.hmu.Unlock()
	return h.c, func() {
		s.hmu.Lock()
		h.refs--
		closeIt := h.retired && h.refs == 0 && h.owned
		s.hmu.Unlock()
		if closeIt {
			h.c.Close()
		}
	}
}

// current is the handle in use, for what its configuration says (it is
// not held: use() for work on it).
func (s *Console) current() *cluster.Cluster {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return s.cur.c
}

// fileProblem is why the last reread of the cluster file failed, with
// when the handle in use was read; "" when it did not fail.
func (s *Console) fileProblem() string {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.reload.err == "" {
		return ""
	}
	return fmt.Sprintf("The cluster file %s could not be reread at %s: %s. The console keeps the hosts it read at %s.",
		s.reload.errPath, s.reload.tried.UTC().Format(time.RFC3339), s.reload.err, s.reload.goodAt.UTC().Format(time.RFC3339))
}

// noteHosts compares the catalog's hosts (names) with what the handle in
// use knows, and rereads the cluster file when the catalog's hosts
// changed since the last look or one is not in the file. It reports
// whether the handle was replaced (the caller reads again).
func (s *Console) noteHosts(ctx context.Context, names []string) bool {
	names = slices.Sorted(slices.Values(names))
	s.hmu.Lock()
	cfg := s.cur.c.Config()
	changed := s.reload.hosts != nil && !slices.Equal(s.reload.hosts, names)
	s.reload.hosts = names
	unknown := false
	for _, n := range names {
		if _, ok := cfg.Host(n); !ok {
			unknown = true
		}
	}
	due := changed || (unknown && time.Since(s.reload.tried) >= reloadEvery)
	if due {
		s.reload.tried = time.Now()
	}
	s.hmu.Unlock()
	if !due {
		return false
	}
	return s.reread(ctx)
}

// reread opens a handle on the cluster file as it is now and serves from
// it; a file that does not read, or names another cluster, leaves the
// handle in use and is reported (fileProblem, the log).
func (s *Console) reread(ctx context.Context) bool {
	old := s.current().Config()
	c, err := s.opts.Reopen(ctx)
	if err == nil {
		if cfg := c.Config(); cfg.Cluster != old.Cluster {
			c.Close()
			err = fmt.Errorf("it now names cluster %q, not %q", cfg.Cluster, old.Cluster)
		}
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.reload.errPath = old.Path
	if err != nil {
		s.reload.err = err.Error()
		s.log.Warn("console: cluster file not reread: keeping the last good one", "path", old.Path, "err", err)
		return false
	}
	prev := s.cur
	prev.retired = true
	if prev.refs == 0 && prev.owned {
		defer prev.c.Close()
	}
	s.cur = &handle{c: c, owned: true}
	s.reload.err, s.reload.goodAt = "", time.Now()
	s.mu.Lock()
	s.identity = nil // the hosts' identities are read again, the new host's too
	s.mu.Unlock()
	s.log.Info("console: cluster file reread", "path", old.Path, "hosts", len(c.Config().Hosts))
	return true
}

// reopenFile is the default Options.Reopen: the handle's cluster file
// loaded and opened as `shardid console` does at startup, with the
// handle's connection budget and logger.
func reopenFile(c *cluster.Cluster) func(ctx context.Context) (*cluster.Cluster, error) {
	return func(ctx context.Context) (*cluster.Cluster, error) {
		cfg, err := shardmgr.LoadConfig(c.Config().Path)
		if err != nil {
			return nil, err
		}
		return cluster.Open(ctx, cfg, cluster.WithConnsPerServer(c.ConnsPerServer()), cluster.WithLogger(c.Logger()))
	}
}

// closeHandles closes the handles the console opened (Close).
func (s *Console) closeHandles() {
	s.hmu.Lock()
	h := s.cur
	s.hmu.Unlock()
	if h.owned {
		h.c.Close()
	}
}
