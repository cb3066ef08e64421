package idgen

import "errors"

// Sentinel errors. Every error this package returns wraps exactly one of
// them with the offending value, so callers test with errors.Is and users
// read one line that says what was wrong.
var (
	// ErrInvalidLayout: widths not positive or not adding up to 63 or 64,
	// a negative epoch, or an epoch so late that the last millisecond would
	// not fit in an int64.
	ErrInvalidLayout = errors.New("idgen: invalid layout")
	// ErrShardOutOfRange: a shard id below 0 or above Layout.MaxShard.
	ErrShardOutOfRange = errors.New("idgen: shard out of range")
	// ErrSeqOutOfRange: a sequence number below 0 or above Layout.MaxSeq.
	ErrSeqOutOfRange = errors.New("idgen: sequence out of range")
	// ErrBeforeEpoch: a time earlier than the layout's epoch.
	ErrBeforeEpoch = errors.New("idgen: time before the epoch")
	// ErrAfterMaxTime: a time later than the last millisecond the layout's
	// time bits can hold (Layout.MaxTime).
	ErrAfterMaxTime = errors.New("idgen: time after the last representable millisecond")
	// ErrNegativeID: an id with bit 63 set. No layout produces one, and
	// PostgreSQL and JavaScript would sort or round it differently.
	ErrNegativeID = errors.New("idgen: negative id")
	// ErrSyntax: text that is not a decimal id (empty, a sign, a fraction,
	// an exponent, other characters, or a JSON value of the wrong kind).
	ErrSyntax = errors.New("idgen: not a decimal id")
	// ErrIDOutOfRange: a decimal number above the largest id, 2^63-1.
	ErrIDOutOfRange = errors.New("idgen: id out of range")
	// ErrUnknownScheme: Decode was asked for a layout it does not know
	// (Schemes lists those it does).
	ErrUnknownScheme = errors.New("idgen: unknown id layout")
	// ErrMalformed: text that is not an id of the named scheme: wrong
	// length or characters, a UUID of another version or variant, a ULID
	// past the year 10889.
	ErrMalformed = errors.New("idgen: malformed id")
)
