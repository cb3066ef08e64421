package snowflake

import (
	"fmt"
	"time"
)

// TwitterEpoch is Twitter's epoch, 2010-11-04T01:42:54.657Z, in milliseconds
// since the Unix epoch.
const TwitterEpoch int64 = 1288834974657

// SonyflakeEpoch is Sonyflake's default start time, 2014-09-01T00:00:00Z,
// in milliseconds since the Unix epoch.
const SonyflakeEpoch int64 = 1409529600000

// DiscordEpoch is Discord's epoch, 2015-01-01T00:00:00Z, in milliseconds
// since the Unix epoch. Discord uses Twitter's 41/5/5/12 split; its
// "internal worker" is the datacenter field here and its "internal process"
// the worker field.
const DiscordEpoch int64 = 1420070400000

// Twitter is the original Snowflake: 41 bits of milliseconds since
// TwitterEpoch, 5 of datacenter, 5 of worker, 12 of sequence (4096 ids per
// millisecond per worker).
var Twitter = Layout{Epoch: TwitterEpoch, Unit: time.Millisecond, TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SeqBits: 12}

// Sonyflake is sony/sonyflake's layout: 39 bits of 10 ms units since
// SonyflakeEpoch, then 8 of sequence, then 16 of machine id (the worker
// here); 256 ids per 10 ms per machine, for 174 years.
var Sonyflake = Layout{Epoch: SonyflakeEpoch, Unit: 10 * time.Millisecond, TimeBits: 39, WorkerBits: 16, SeqBits: 8, SeqAboveWorker: true}

// Layout says how a 64-bit id is split. From the top: the sign bit (always
// 0), TimeBits of time units since Epoch, then DatacenterBits and
// WorkerBits (the node), then SeqBits of sequence; with SeqAboveWorker the
// sequence comes before the node, as in Sonyflake.
//
// The zero value is Twitter. Epoch 0 means TwitterEpoch, Unit 0 means one
// millisecond, and all four widths 0 mean 41/5/5/12; a layout that sets
// some widths must set all of them (DatacenterBits may be 0). The widths
// add up to 63.
type Layout struct {
	// Epoch is the first millisecond an id can hold, in milliseconds since
	// the Unix epoch. 0 means TwitterEpoch.
	Epoch int64
	// Unit is the length of one tick of the time field, a whole number of
	// milliseconds. 0 means one millisecond.
	Unit time.Duration
	// TimeBits, DatacenterBits, WorkerBits and SeqBits are the field widths.
	TimeBits, DatacenterBits, WorkerBits, SeqBits int
	// SeqAboveWorker puts the sequence above the node bits (Sonyflake's
	// order) instead of below them (Twitter's).
	SeqAboveWorker bool
}

// Resolved returns l with its zero values replaced by the defaults they
// stand for.
func (l Layout) Resolved() Layout {
	if l.Epoch == 0 {
		l.Epoch = TwitterEpoch
	}
	if l.Unit == 0 {
		l.Unit = time.Millisecond
	}
	if l.TimeBits == 0 && l.DatacenterBits == 0 && l.WorkerBits == 0 && l.SeqBits == 0 {
		l.TimeBits, l.DatacenterBits, l.WorkerBits, l.SeqBits = 41, 5, 5, 12
	}
	return l
}

// Validate reports whether l is usable; the error wraps ErrInvalidLayout.
func (l Layout) Validate() error {
	_, err := l.check()
	return err
}

func (l Layout) check() (Layout, error) {
	r := l.Resolved()
	if r.TimeBits < 2 || r.DatacenterBits < 0 || r.WorkerBits < 0 || r.SeqBits < 1 ||
		r.TimeBits > 63 || r.DatacenterBits > 31 || r.WorkerBits > 31 || r.SeqBits > 31 ||
		r.TimeBits+r.DatacenterBits+r.WorkerBits+r.SeqBits != 63 {
		return r, fmt.Errorf("%w: widths %d/%d/%d/%d must add up to 63 (time at least 2, sequence at least 1, none above 31 but time)",
			ErrInvalidLayout, r.TimeBits, r.DatacenterBits, r.WorkerBits, r.SeqBits)
	}
	if r.Unit < time.Millisecond || r.Unit%time.Millisecond != 0 {
		return r, fmt.Errorf("%w: unit %s is not a whole number of milliseconds", ErrInvalidLayout, r.Unit)
	}
	if r.Epoch < 0 {
		return r, fmt.Errorf("%w: negative epoch %d", ErrInvalidLayout, r.Epoch)
	}
	return r, nil
}

// String shows the layout in effect, e.g. "41/5/5/12 x1ms epoch 1288834974657".
func (l Layout) String() string {
	r := l.Resolved()
	order := ""
	if r.SeqAboveWorker {
		order = " seq-above-worker"
	}
	return fmt.Sprintf("%d/%d/%d/%d x%s epoch %d%s", r.TimeBits, r.DatacenterBits, r.WorkerBits, r.SeqBits, r.Unit, r.Epoch, order)
}

// MaxDatacenter, MaxWorker and MaxSeq are the largest values of the fields.
func (l Layout) MaxDatacenter() int64 { r := l.Resolved(); return 1<<r.DatacenterBits - 1 }
func (l Layout) MaxWorker() int64     { r := l.Resolved(); return 1<<r.WorkerBits - 1 }
func (l Layout) MaxSeq() int64        { r := l.Resolved(); return 1<<r.SeqBits - 1 }

func (l Layout) unitMS() int64   { return int64(l.Unit / time.Millisecond) }
func (l Layout) maxTicks() int64 { return 1<<l.TimeBits - 1 }
func (l Layout) nodeBits() int   { return l.DatacenterBits + l.WorkerBits }
func (l Layout) seqMask() int64  { return 1<<l.SeqBits - 1 }
func (l Layout) nodeMask() int64 { return 1<<l.nodeBits() - 1 }
func (l Layout) timeShift() int  { return l.nodeBits() + l.SeqBits }
func (l Layout) tickOf(ms int64) int64 {
	// Floor division: a time before the epoch is a negative tick, which
	// the generator refuses rather than rounding it up into range.
	d := ms - l.Epoch
	if l.Unit == time.Millisecond {
		return d // spares a division on every id of millisecond layouts
	}
	t := d / l.unitMS()
	if d%l.unitMS() != 0 && d < 0 {
		t--
	}
	return t
}

// tickStart is the first Unix millisecond of tick t.
func (l Layout) tickStart(t int64) int64 { return l.Epoch + t*l.unitMS() }

// compose packs checked fields. node is datacenter<<WorkerBits | worker.
func (l Layout) compose(tick, node, seq int64) int64 {
	if l.SeqAboveWorker {
		return tick<<l.timeShift() | seq<<l.nodeBits() | node
	}
	return tick<<l.timeShift() | node<<l.SeqBits | seq
}

// Parts is an id taken apart by Layout.Decompose.
type Parts struct {
	ID int64 `json:"id,string"`
	// Time is the start of the id's tick, in UTC.
	Time time.Time `json:"time"`
	// Ticks is the raw time field: units since the epoch.
	Ticks      int64 `json:"ticks"`
	Datacenter int64 `json:"datacenter"`
	Worker     int64 `json:"worker"`
	Seq        int64 `json:"seq"`
}

// Decompose takes id apart. Negative ids do not exist in any layout.
func (l Layout) Decompose(id int64) (Parts, error) {
	r, err := l.check()
	if err != nil {
		return Parts{}, err
	}
	if id < 0 {
		return Parts{}, fmt.Errorf("%w: %d is negative", ErrInvalidID, id)
	}
	p := Parts{ID: id, Ticks: id >> r.timeShift()}
	var node int64
	if r.SeqAboveWorker {
		p.Seq = id >> r.nodeBits() & r.seqMask()
		node = id & r.nodeMask()
	} else {
		node = id >> r.SeqBits & r.nodeMask()
		p.Seq = id & r.seqMask()
	}
	p.Datacenter = node >> r.WorkerBits
	p.Worker = node & (1<<r.WorkerBits - 1)
	p.Time = time.UnixMilli(r.tickStart(p.Ticks)).UTC()
	return p, nil
}

// Compose builds the id for time t (truncated to its tick), datacenter,
// worker and seq; every field is checked, nothing is masked into a
// neighbour.
func (l Layout) Compose(t time.Time, datacenter, worker, seq int64) (int64, error) {
	r, err := l.check()
	if err != nil {
		return 0, err
	}
	tick := r.tickOf(t.UnixMilli())
	switch {
	case tick < 0 || tick > r.maxTicks():
		return 0, fmt.Errorf("%w: %s is outside the layout's time range", ErrInvalidID, t.UTC().Format(time.RFC3339Nano))
	case datacenter < 0 || datacenter > r.MaxDatacenter():
		return 0, fmt.Errorf("%w: datacenter %d not in 0..%d", ErrInvalidID, datacenter, r.MaxDatacenter())
	case worker < 0 || worker > r.MaxWorker():
		return 0, fmt.Errorf("%w: worker %d not in 0..%d", ErrInvalidID, worker, r.MaxWorker())
	case seq < 0 || seq > r.MaxSeq():
		return 0, fmt.Errorf("%w: seq %d not in 0..%d", ErrInvalidID, seq, r.MaxSeq())
	}
	return r.compose(tick, datacenter<<r.WorkerBits|worker, seq), nil
}
