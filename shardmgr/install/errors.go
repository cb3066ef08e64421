package install

import "errors"

// Sentinel errors of the package; test with errors.Is. They say what went
// wrong, never which command to run next (the CLI adds that).
var (
	// ErrHostInUse: the cluster file leaves out a host that still holds
	// shards, or that unfinished moves (or a retired copy) involve.
	ErrHostInUse = errors.New("host still in use")
)
