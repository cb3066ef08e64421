package snowflake

import (
	"errors"

	"github.com/shardid/shardid/internal/pgtrust"
)

// The errors of the package, for errors.Is. Messages returned wrap them
// with the numbers involved.
var (
	// ErrInvalidLayout: the widths, unit or epoch of a Layout are unusable.
	ErrInvalidLayout = errors.New("snowflake: invalid layout")
	// ErrInvalidSettings: a Settings field or an option is out of range.
	ErrInvalidSettings = errors.New("snowflake: invalid settings")
	// ErrInvalidID: an id or a field does not fit the layout.
	ErrInvalidID = errors.New("snowflake: id does not fit the layout")
	// ErrClockMovedBackwards: the clock is behind the last id issued (or
	// behind the last time the worker's previous holder could have used)
	// by more than Settings.MaxBackstep. Nothing was issued; NextID works
	// again once the clock has caught up.
	ErrClockMovedBackwards = errors.New("snowflake: clock moved backwards")
	// ErrOverTimeLimit: the clock is before the layout's epoch or past the
	// last time its time field can hold.
	ErrOverTimeLimit = errors.New("snowflake: time outside the layout")
	// ErrLeaseExpired: the worker's lease was not renewed in time, so the
	// generator stopped issuing before the lease could expire in the
	// database. It resumes if a later renewal succeeds.
	ErrLeaseExpired = errors.New("snowflake: worker lease not renewed in time")
	// ErrLeaseLost: the lease's row carries another fencing token, or is
	// gone: the worker id may belong to someone else now. The generator
	// stopped at once and resumes when it has leased a worker again.
	ErrLeaseLost = errors.New("snowflake: worker lease lost")
	// ErrLeaseNotYetUsable: the leased worker's previous holders may have
	// used times ahead of this clock (their clock ran ahead, or the row
	// was deleted while they held it); the generator issues once this
	// clock passes them.
	ErrLeaseNotYetUsable = errors.New("snowflake: leased worker not usable yet")
	// ErrNoFreeWorker: every worker id of the datacenter is leased.
	ErrNoFreeWorker = errors.New("snowflake: no free worker id")
	// ErrUntrusted: the lease database's schema shardid, or something in
	// it, was made by a role that is neither the one the lease logs in as
	// nor a superuser; no lease was written (docs/operations.md#trust).
	ErrUntrusted = pgtrust.ErrUntrusted
	// ErrClosed: the generator was closed.
	ErrClosed = errors.New("snowflake: generator closed")
)
