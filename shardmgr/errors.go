package shardmgr

import (
	"errors"
	"fmt"

	"github.com/shardid/shardid/shardmgr/internal/limits"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrNotInitialized: the catalog has no cluster yet (run shardid init).
	ErrNotInitialized = errors.New("cluster not initialised (run shardid init)")
	// ErrUnknownShard: a shard id outside 0..shards-1, or an id that
	// decodes to one.
	ErrUnknownShard = errors.New("unknown shard")
	// ErrUnknownHost: a host the catalog or the cluster file does not know.
	ErrUnknownHost = errors.New("unknown host")
	// ErrShardReadOnly: the shard accepts reads only.
	ErrShardReadOnly = errors.New("shard is read-only")
	// ErrShardMoving: the shard is being moved to another host; writes wait
	// for the move to finish.
	ErrShardMoving = errors.New("shard is moving")
	// ErrGenerationChanged: the catalog changed since the caller read it;
	// another manager won. Re-read and decide again.
	ErrGenerationChanged = errors.New("catalog generation changed")
	// ErrClusterMismatch: the cluster file and the catalog (or a host)
	// disagree on something fixed once initialised.
	ErrClusterMismatch = errors.New("cluster file does not match the catalog")
	// ErrClosed: the router was closed.
	ErrClosed = errors.New("router closed")
)

// ShardError is an error about one logical shard on one host.
type ShardError struct {
	Shard int
	Host  string // empty when unknown
	Err   error
}

func (e *ShardError) Error() string {
	if e.Host == "" {
		return fmt.Sprintf("shard %d: %v", e.Shard, e.Err)
	}
	return fmt.Sprintf("shard %d on %s: %v", e.Shard, e.Host, e.Err)
}

func (e *ShardError) Unwrap() error { return e.Err }

// GenerationError reports a guarded catalog change that lost: the caller
// expected generation Want and found Got. It wraps ErrGenerationChanged.
type GenerationError struct{ Want, Got int64 }

func (e *GenerationError) Error() string {
	return fmt.Sprintf("%v: expected generation %d, catalog is at %d", ErrGenerationChanged, e.Want, e.Got)
}

func (e *GenerationError) Unwrap() error { return ErrGenerationChanged }

// ErrFileTooLarge is wrapped by the error for a file (the cluster file, a
// migration) larger than shardid reads.
var ErrFileTooLarge = limits.ErrFileTooLarge
