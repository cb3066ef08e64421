package idgen

import (
	"fmt"
	"math"
	"time"
)

// Defaults: Instagram's layout and epoch.
const (
	// DefaultEpoch is Instagram's epoch, 2011-08-24T21:07:01.721Z, in
	// milliseconds since the Unix epoch.
	DefaultEpoch int64 = 1314220021721
	// DefaultTimeBits, DefaultShardBits and DefaultSeqBits are Instagram's
	// 41/13/10. They add up to 64, so the top time bit is the sign bit and
	// stays 0: 40 usable time bits, enough until 2046-06-27.
	DefaultTimeBits  = 41
	DefaultShardBits = 13
	DefaultSeqBits   = 10
)

// TimeFormat is how the toolkit writes an id's time: RFC 3339 with exactly
// three fractional digits, because ids carry milliseconds and a fixed width
// keeps columns of times aligned and sortable as text.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Default is Instagram's layout: epoch DefaultEpoch, 41/13/10.
var Default = Layout{}

// DefaultLayout returns Default with its defaults spelled out.
func DefaultLayout() Layout {
	return Layout{Epoch: DefaultEpoch, TimeBits: DefaultTimeBits, ShardBits: DefaultShardBits, SeqBits: DefaultSeqBits}
}

// Layout says how an id's 64 bits are split: from the top, the sign bit
// (always 0), milliseconds since Epoch, the logical shard, the sequence.
//
// The zero value is Default. Epoch 0 means DefaultEpoch, and all three widths
// 0 mean 41/13/10; a layout that sets some widths must set all three.
// Widths must be positive and add up to 63 or 64. When they add up to 64 the
// top time bit is bit 63, which stays 0, so only UsableTimeBits of the time
// bits carry time. This is the same rule as the SQL generator's
// (sql.Params.UsableTimeBits), so ids made on either side decode on the other.
type Layout struct {
	// Epoch is the first millisecond an id can hold, in milliseconds since
	// the Unix epoch. 0 means DefaultEpoch.
	Epoch int64
	// TimeBits, ShardBits and SeqBits are the widths of the three fields.
	// All zero means DefaultTimeBits, DefaultShardBits, DefaultSeqBits.
	TimeBits, ShardBits, SeqBits int
}

// Parts is an id taken apart by Layout.Decompose.
type Parts struct {
	ID ID
	// Time is the id's millisecond, in UTC.
	Time time.Time
	// Millis is the id's time field: milliseconds since the layout's epoch.
	Millis int64
	Shard  int64
	Seq    int64
}

// resolved fills in the documented defaults for zero values.
func (l Layout) resolved() Layout {
	if l.Epoch == 0 {
		l.Epoch = DefaultEpoch
	}
	if l.TimeBits == 0 && l.ShardBits == 0 && l.SeqBits == 0 {
		l.TimeBits, l.ShardBits, l.SeqBits = DefaultTimeBits, DefaultShardBits, DefaultSeqBits
	}
	return l
}

// Resolved returns l with its zero values replaced by the defaults they
// stand for, so that a caller can print or store the layout in effect.
func (l Layout) Resolved() Layout { return l.resolved() }

// Validate reports whether l describes a usable layout. The error wraps
// ErrInvalidLayout.
func (l Layout) Validate() error {
	_, err := l.check()
	return err
}

// check resolves and validates in one step, so every entry point works on
// the same numbers it validated.
func (l Layout) check() (Layout, error) {
	r := l.resolved()
	// TimeBits >= 2 matches the SQL renderer: with one time bit a 64-bit
	// layout would have no usable time at all. The upper bounds come first
	// so that the sum cannot overflow into a plausible 63 or 64.
	in := func(w, lo int) bool { return w >= lo && w <= 64 }
	sum := r.TimeBits + r.ShardBits + r.SeqBits
	if !in(r.TimeBits, 2) || !in(r.ShardBits, 1) || !in(r.SeqBits, 1) || (sum != 63 && sum != 64) {
		return r, fmt.Errorf("%w: widths %d/%d/%d must be positive (time at least 2) and add up to 63 or 64 (bit 63 stays 0)",
			ErrInvalidLayout, r.TimeBits, r.ShardBits, r.SeqBits)
	}
	if r.Epoch < 0 {
		return r, fmt.Errorf("%w: negative epoch %d", ErrInvalidLayout, r.Epoch)
	}
	if r.Epoch > math.MaxInt64-r.maxMillis() {
		return r, fmt.Errorf("%w: epoch %d leaves no room for %d time bits in an int64 of milliseconds",
			ErrInvalidLayout, r.Epoch, r.UsableTimeBits())
	}
	return r, nil
}

// String shows the layout in effect, e.g. "41/13/10 epoch 1314220021721".
func (l Layout) String() string {
	r := l.resolved()
	return fmt.Sprintf("%d/%d/%d epoch %d", r.TimeBits, r.ShardBits, r.SeqBits, r.Epoch)
}

// UsableTimeBits is how many time bits can be non-zero: 63 - ShardBits -
// SeqBits (40 for the default layout).
func (l Layout) UsableTimeBits() int {
	r := l.resolved()
	return 63 - r.ShardBits - r.SeqBits
}

// maxMillis, maxShard and maxSeq are the field limits of a checked layout.
func (l Layout) maxMillis() int64 { return 1<<(63-l.ShardBits-l.SeqBits) - 1 }
func (l Layout) maxShard() int64  { return 1<<l.ShardBits - 1 }
func (l Layout) maxSeq() int64    { return 1<<l.SeqBits - 1 }
func (l Layout) maxTime() time.Time {
	return time.UnixMilli(l.Epoch + l.maxMillis()).UTC()
}

// MaxShard is the largest shard id (8191 for the default layout), or -1 if
// the layout is invalid.
func (l Layout) MaxShard() int64 {
	r, err := l.check()
	if err != nil {
		return -1
	}
	return r.maxShard()
}

// MaxSeq is the largest sequence number (1023 for the default layout), or -1
// if the layout is invalid.
func (l Layout) MaxSeq() int64 {
	r, err := l.check()
	if err != nil {
		return -1
	}
	return r.maxSeq()
}

// EpochTime is the layout's epoch as a UTC time.
func (l Layout) EpochTime() time.Time { return time.UnixMilli(l.resolved().Epoch).UTC() }

// MaxTime is the last millisecond an id can hold: Epoch + 2^UsableTimeBits - 1
// (2046-06-27T17:00:49.496Z for the default layout), or the zero time if the
// layout is invalid.
func (l Layout) MaxTime() time.Time {
	r, err := l.check()
	if err != nil {
		return time.Time{}
	}
	return r.maxTime()
}

// Compose builds the id for time t (truncated to the millisecond), shard and
// seq. Every field is checked against the layout; nothing out of range is
// ever masked or shifted into a neighbouring field.
func (l Layout) Compose(t time.Time, shard, seq int64) (ID, error) {
	r, err := l.check()
	if err != nil {
		return 0, err
	}
	// Compare as times before converting: UnixMilli overflows for times
	// hundreds of millions of years away, which would wrap into range.
	if t.Before(r.EpochTime()) {
		return 0, fmt.Errorf("%w: %s is before %s", ErrBeforeEpoch, t.UTC().Format(TimeFormat), r.EpochTime().Format(TimeFormat))
	}
	if !t.Before(r.maxTime().Add(time.Millisecond)) {
		return 0, fmt.Errorf("%w: %s is after %s (%d usable time bits)", ErrAfterMaxTime, t.UTC().Format(TimeFormat), r.maxTime().Format(TimeFormat), r.UsableTimeBits())
	}
	return r.compose(t.UnixMilli()-r.Epoch, shard, seq)
}

// ComposeMillis is Compose for a time given as milliseconds since the
// layout's epoch, the number stored in the id's time field.
func (l Layout) ComposeMillis(millis, shard, seq int64) (ID, error) {
	r, err := l.check()
	if err != nil {
		return 0, err
	}
	return r.compose(millis, shard, seq)
}

// compose works on a checked layout.
func (l Layout) compose(millis, shard, seq int64) (ID, error) {
	if millis < 0 {
		return 0, fmt.Errorf("%w: %d ms since the epoch", ErrBeforeEpoch, millis)
	}
	if millis > l.maxMillis() {
		return 0, fmt.Errorf("%w: %d ms since the epoch exceeds %d (%d usable time bits)", ErrAfterMaxTime, millis, l.maxMillis(), l.UsableTimeBits())
	}
	if shard < 0 || shard > l.maxShard() {
		return 0, fmt.Errorf("%w: %d not in 0..%d (%d shard bits)", ErrShardOutOfRange, shard, l.maxShard(), l.ShardBits)
	}
	if seq < 0 || seq > l.maxSeq() {
		return 0, fmt.Errorf("%w: %d not in 0..%d (%d sequence bits)", ErrSeqOutOfRange, seq, l.maxSeq(), l.SeqBits)
	}
	return ID(millis<<(l.ShardBits+l.SeqBits) | shard<<l.SeqBits | seq), nil
}

// Decompose takes id apart. Every non-negative id is valid in every layout
// (its top time bit, when the widths add up to 64, is bit 63 and so 0); a
// negative id fails with ErrNegativeID.
func (l Layout) Decompose(id ID) (Parts, error) {
	r, err := l.check()
	if err != nil {
		return Parts{}, err
	}
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d has bit 63 set", ErrNegativeID, int64(id))
	}
	v := int64(id)
	millis := v >> (r.ShardBits + r.SeqBits)
	return Parts{
		ID:     id,
		Time:   time.UnixMilli(r.Epoch + millis).UTC(),
		Millis: millis,
		Shard:  v >> r.SeqBits & r.maxShard(),
		Seq:    v & r.maxSeq(),
	}, nil
}
