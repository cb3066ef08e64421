package install

import "errors"

// Sentinel errors of the package; test with errors.Is. They say what went
// wrong, never which command to run next (the CLI adds that).
var (
	// ErrHostInUse: the cluster file leaves out a host that still holds
	// shards, or that unfinished moves (or a retired copy) involve.
	ErrHostInUse = errors.New("host still in use")
)

// The catalog's and the hosts' identity (docs/operations.md#identity).
var (
	// ErrCatalogEmpty: the catalog's database does not exist or holds no
	// cluster, while hosts of the cluster file record that they belong to
	// a cluster: a catalog lost (a failed restore) or a catalog address
	// mistyped. Init refuses before creating anything.
	ErrCatalogEmpty = errors.New("the catalog holds no cluster, but the hosts do")
	// ErrOtherCatalog: a host records that another catalog owns it (its
	// cluster identity is not the catalog's).
	ErrOtherCatalog = errors.New("the host belongs to another catalog")
)
