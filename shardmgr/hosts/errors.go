package hosts

import "errors"

// Sentinel errors of the package; test with errors.Is. A refusal changes
// nothing.
var (
	// ErrNotSameDatabase: the server at a new DSN is not the host's
	// database, by what the servers say (or a second primary of it while
	// the old one still accepts writes).
	ErrNotSameDatabase = errors.New("not the host's database")
	// ErrUnreachable: the server at a new DSN did not answer.
	ErrUnreachable = errors.New("server unreachable")
	// ErrHostInUse: a host to remove still holds shards, takes part in
	// an unfinished move or keeps a moved shard's retired copy.
	ErrHostInUse = errors.New("host still in use")
	// ErrNeedsFailover: the server at a new DSN is the host's server on a
	// newer timeline than the catalog recorded (a promoted standby, or a
	// backup restored to a point in time): it may lack ids the old
	// primary handed out and never replicated, so only Failover, which
	// first carries every counter past them, may point the host there.
	ErrNeedsFailover = errors.New("a promoted standby of the host's server: its counters must be advanced first")
	// ErrNotIdentified: the catalog records no server identity for the
	// host (a row of an older binary, or one catalog repair added; init
	// records it), which Failover and SetDSN compare the new server with.
	ErrNotIdentified = errors.New("the catalog records no server identity for the host")

	// Failover's own refusals.

	// ErrNotPromoted: the new server is still a standby.
	ErrNotPromoted = errors.New("the new server is still in recovery")
	// ErrNotStandbyOf: the new server is not a promoted standby of the
	// host's recorded server (another system identifier, another
	// database's record, or no newer timeline).
	ErrNotStandbyOf = errors.New("the new server is not a promoted standby of the host's server")
	// ErrHostMoving: a move of one of the host's shards is unfinished.
	ErrHostMoving = errors.New("a move involving the host is unfinished")

	// ErrAnotherServer: the new server's system identifier is not the one
	// the catalog recorded for the host (wrapped with ErrNotStandbyOf or
	// ErrNotSameDatabase): another server, such as the host's database
	// restored onto new hardware by pg_dump and pg_restore, which only
	// Failover with FailoverOptions.NewServer may point the host at.
	ErrAnotherServer = errors.New("another server than the one recorded")
	// ErrSameServer: Failover with NewServer, to a server with the
	// recorded system identifier (the host's server, or a standby of it):
	// not another server; the checks of a plain failover apply.
	ErrSameServer = errors.New("the new server has the recorded system identifier")
	// ErrOldServerWritable: Failover (to a promoted standby, or with
	// NewServer) while the host's server at its old DSN still answers as
	// a primary (not in recovery): two primaries of one host would take
	// writes and hand out the same ids.
	ErrOldServerWritable = errors.New("the host's old server still accepts writes")
)
