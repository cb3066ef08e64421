package idgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ID is a sharded 64-bit id, the value of a PostgreSQL bigint column. Valid
// ids are never negative.
//
// As text and JSON an ID is a decimal string: JavaScript numbers lose
// precision above 2^53, and today's ids are far above that. On input both
// "123" and 123 are accepted.
type ID int64

// Time is the id's millisecond in the default layout, in UTC; the zero
// time for a negative id. Use Layout.Decompose for other layouts.
func (id ID) Time() time.Time {
	p, err := Default.Decompose(id)
	if err != nil {
		return time.Time{}
	}
	return p.Time
}

// Shard is the id's logical shard in the default layout; -1 for a negative id.
func (id ID) Shard() int64 {
	p, err := Default.Decompose(id)
	if err != nil {
		return -1
	}
	return p.Shard
}

// Seq is the id's sequence number in the default layout; -1 for a negative id.
func (id ID) Seq() int64 {
	p, err := Default.Decompose(id)
	if err != nil {
		return -1
	}
	return p.Seq
}

// String is the id in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Parse reads an id written in decimal: one or more ASCII digits, nothing
// else (no sign, spaces, fraction or exponent), at most 2^63-1.
func Parse(s string) (ID, error) {
	if err := checkDigits(s); err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s is above the largest id %d", ErrIDOutOfRange, quote(s), int64(math.MaxInt64))
	}
	return ID(v), nil
}

// checkDigits names what is wrong with s, so that a user who pasted a
// float or a negative number is told so rather than just "invalid".
func checkDigits(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", ErrSyntax)
	}
	if s[0] == '-' {
		return fmt.Errorf("%w: %s (ids are never negative)", ErrNegativeID, quote(s))
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
		case c == '.':
			return fmt.Errorf("%w: %s has a fraction", ErrSyntax, quote(s))
		case c == 'e' || c == 'E':
			return fmt.Errorf("%w: %s has an exponent", ErrSyntax, quote(s))
		default:
			return fmt.Errorf("%w: %s (want decimal digits only)", ErrSyntax, quote(s))
		}
	}
	return nil
}

// quote keeps error messages one short line whatever the input.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// MarshalText writes the id in decimal. A negative id is an error rather
// than text that UnmarshalText would refuse.
func (id ID) MarshalText() ([]byte, error) {
	if id < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNegativeID, int64(id))
	}
	return strconv.AppendInt(nil, int64(id), 10), nil
}

// UnmarshalText reads an id as Parse does.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// MarshalJSON writes the id as a quoted decimal string, "123".
func (id ID) MarshalJSON() ([]byte, error) {
	if id < 0 {
		return nil, fmt.Errorf("%w: %d", ErrNegativeID, int64(id))
	}
	b := make([]byte, 0, 21)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a decimal string ("123") or a bare integer (123).
// Fractions, exponents, negative numbers and numbers above 2^63-1 are
// errors, even when they denote an integer (1e3, 5.0): an id that went
// through a float may already have lost digits. As encoding/json expects of
// an Unmarshaler, null leaves the id unchanged.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if n := len(b); n >= 2 && b[0] == '"' && b[n-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		// Without escapes the digits are the bytes between the quotes, and
		// anything else there is refused by Parse; this spares the common
		// case a trip through encoding/json.
		s = string(b[1 : n-1])
	} else if len(b) > 0 && b[0] == '"' {
		// json.Unmarshal, not strconv.Unquote: JSON and Go escapes differ.
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%w: %s is not a JSON string", ErrSyntax, quote(string(b)))
		}
	} else if len(b) > 0 && b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return fmt.Errorf("%w: JSON %s (want a decimal string or number)", ErrSyntax, quote(s))
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}
