package segment

import (
	"errors"
	"fmt"

	"github.com/shardid/shardid/internal/pgtrust"
)

var (
	// ErrUnknownTag is returned for a tag the allocator was not configured
	// with.
	ErrUnknownTag = errors.New("unknown tag")
	// ErrUnavailable is returned when the ids in memory are used up and no
	// source database can hand out a new segment (all failing or cut off
	// by their circuit breakers). The allocator never falls back to ids it
	// cannot prove unique.
	ErrUnavailable = errors.New("no source database can serve the tag")
	// ErrNotReady is wrapped by Allocator.Ready's error.
	ErrNotReady = errors.New("segment allocator not ready")
	// ErrUntrusted: a source's schema shardid, or something in it, was
	// made by a role that is neither the one the allocator logs in as nor
	// a superuser; the source is not written to (docs/operations.md#trust).
	ErrUntrusted = pgtrust.ErrUntrusted
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("allocator closed")
)

// LayoutError reports a source database whose row for a tag does not
// match the source's position in the configuration: another stride
// (number of sources), another residue (position), or a fenced row. The
// allocator refuses to use that source for the tag, since handing out its
// ids could collide with another source's.
type LayoutError struct {
	Source      string
	Tag         string
	WantStride  int
	WantResidue int
	GotStride   int
	GotResidue  int
	Fenced      bool
}

func (e *LayoutError) Error() string {
	if e.Fenced {
		return fmt.Sprintf("source %s: tag %s is fenced (a layout change is in progress; see docs/segments.md)", e.Source, e.Tag)
	}
	return fmt.Sprintf("source %s: tag %s is residue %d of %d there, but the configuration lists this source as %d of %d; sources must keep their order (see docs/segments.md)",
		e.Source, e.Tag, e.GotResidue, e.GotStride, e.WantResidue, e.WantStride)
}
