package idgen

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The epochs of the 64-bit schemes Decode reads, in milliseconds since the
// Unix epoch.
const (
	// TwitterEpoch is Twitter's Snowflake epoch, 2010-11-04T01:42:54.657Z.
	TwitterEpoch int64 = 1288834974657
	// SonyflakeEpoch is sony/sonyflake's default start, 2014-09-01T00:00:00Z.
	SonyflakeEpoch int64 = 1409529600000
)

// Field is one named part of a decoded id: an integer or, for random bits,
// lower-case hex.
type Field struct {
	Name  string
	Value any // int64 or string
}

// Decoded is an id of any scheme taken apart by Decode.
type Decoded struct {
	// Scheme is the layout it was read with: one of Schemes().
	Scheme string
	// ID is the id as given, normalised (decimal, or lower-case canonical
	// text for UUIDs and ObjectIds, upper case for ULIDs).
	ID string
	// Time is the instant the id carries, in UTC, at the scheme's
	// precision (a millisecond; 10 ms for Sonyflake; a second for ObjectId).
	Time time.Time
	// Fields are the other parts, in the order they sit in the id.
	Fields []Field
}

// Field returns the value of the named field and whether it exists.
func (d Decoded) Field(name string) (any, bool) {
	for _, f := range d.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// String is one line: the id, its time (TimeFormat) and name=value pairs.
func (d Decoded) String() string {
	var b strings.Builder
	b.WriteString(d.ID)
	b.WriteByte(' ')
	b.WriteString(d.Time.Format(TimeFormat))
	for _, f := range d.Fields {
		fmt.Fprintf(&b, " %s=%v", f.Name, f.Value)
	}
	return b.String()
}

// MarshalJSON writes one flat object: {"id":"...","layout":"...",
// "time":"...", then the fields in order}. The id is a string because
// JavaScript numbers lose precision above 2^53.
func (d Decoded) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSON(&b, d.ID)
	b.WriteString(`,"layout":`)
	writeJSON(&b, d.Scheme)
	b.WriteString(`,"time":`)
	writeJSON(&b, d.Time.Format(TimeFormat))
	for _, f := range d.Fields {
		b.WriteByte(',')
		writeJSON(&b, f.Name)
		b.WriteByte(':')
		writeJSON(&b, f.Value)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	out, _ := json.Marshal(v) // strings and int64 only: cannot fail
	b.Write(out)
}

// A scheme Decode knows: how to read one id, and whether it has an epoch.
type scheme struct {
	decode   func(s string, epoch int64) (Decoded, error)
	hasEpoch bool
	about    string
	// spanMS is the latest time after the epoch an id can carry, in ms:
	// an epoch later than math.MaxInt64 - spanMS would overflow.
	spanMS int64
}

var schemes = map[string]scheme{
	"instagram": {decodeInstagram, true, "64-bit: 41 bits of ms since the epoch (default Instagram's), 13 of shard, 10 of sequence", 0},
	"snowflake": {decodeSnowflake, true, "64-bit: 41 bits of ms since the epoch (default Twitter's), 5 of datacenter, 5 of worker, 12 of sequence", 1<<41 - 1},
	"sonyflake": {decodeSonyflake, true, "64-bit: 39 bits of 10 ms since the epoch (default 2014-09-01), 8 of sequence, 16 of machine", (1<<39 - 1) * 10},
	"uuidv7":    {func(s string, _ int64) (Decoded, error) { return DecodeUUIDv7(s) }, false, "RFC 9562 version 7 UUID: 48 bits of Unix ms, rand_a, rand_b", 0},
	"ulid":      {func(s string, _ int64) (Decoded, error) { return DecodeULID(s) }, false, "26 Crockford base32 characters: 48 bits of Unix ms, 80 random bits", 0},
	"objectid":  {func(s string, _ int64) (Decoded, error) { return DecodeObjectID(s) }, false, "MongoDB ObjectId, 24 hex digits: 4 bytes of Unix seconds, 5 random (once machine and process), 3 of counter", 0},
}

// Schemes lists the layouts Decode reads, sorted.
func Schemes() []string {
	out := make([]string, 0, len(schemes))
	for name := range schemes {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// SchemeHasEpoch reports whether the scheme's time counts from a
// configurable epoch (the 64-bit ones) rather than from 1970.
func SchemeHasEpoch(name string) bool { return schemes[name].hasEpoch }

// AboutScheme is a one-line description of the scheme's layout.
func AboutScheme(name string) string { return schemes[name].about }

// Decode reads id as the named scheme. epoch (milliseconds since the Unix
// epoch) applies to the 64-bit schemes; 0 means the scheme's own (Instagram
// for instagram, TwitterEpoch for snowflake, SonyflakeEpoch for sonyflake).
// The others carry Unix time and refuse a non-zero epoch.
func Decode(name, id string, epoch int64) (Decoded, error) {
	sc, ok := schemes[name]
	if !ok {
		return Decoded{}, fmt.Errorf("%w: %q (want one of %s)", ErrUnknownScheme, name, strings.Join(Schemes(), ", "))
	}
	if epoch != 0 && !sc.hasEpoch {
		return Decoded{}, fmt.Errorf("%w: %s ids carry Unix time; an epoch does not apply", ErrInvalidLayout, name)
	}
	if epoch < 0 {
		return Decoded{}, fmt.Errorf("%w: negative epoch %d", ErrInvalidLayout, epoch)
	}
	if sc.spanMS > 0 && epoch > math.MaxInt64-sc.spanMS {
		// The instagram layout checks its own (Layout.Validate).
		return Decoded{}, fmt.Errorf("%w: epoch %d leaves no room for %s ids' time in an int64 of milliseconds", ErrInvalidLayout, epoch, name)
	}
	return sc.decode(strings.TrimSpace(id), epoch)
}

func decodeInstagram(s string, epoch int64) (Decoded, error) {
	id, err := Parse(s)
	if err != nil {
		return Decoded{}, err
	}
	p, err := Layout{Epoch: epoch}.Decompose(id)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{Scheme: "instagram", ID: id.String(), Time: p.Time,
		Fields: []Field{{"shard", p.Shard}, {"seq", p.Seq}}}, nil
}

// DecodeSnowflake reads a Twitter-layout Snowflake id (41/5/5/12 in
// milliseconds since epoch; 0 means TwitterEpoch). Discord's ids use the
// same split with epoch 1420070400000; its "internal worker" is the
// datacenter field and its "internal process" the worker field.
func DecodeSnowflake(s string, epoch int64) (Decoded, error) {
	return Decode("snowflake", s, epoch) // the epoch checked as Decode checks it
}

func decodeSnowflake(s string, epoch int64) (Decoded, error) {
	if epoch == 0 {
		epoch = TwitterEpoch
	}
	id, err := Parse(s)
	if err != nil {
		return Decoded{}, err
	}
	v := int64(id)
	return Decoded{Scheme: "snowflake", ID: id.String(), Time: time.UnixMilli(epoch + v>>22).UTC(),
		Fields: []Field{{"datacenter", v >> 17 & 31}, {"worker", v >> 12 & 31}, {"seq", v & 4095}}}, nil
}

// DecodeSonyflake reads a Sonyflake id: 39 bits of 10 ms units since epoch
// (0 means SonyflakeEpoch), 8 of sequence, 16 of machine id.
func DecodeSonyflake(s string, epoch int64) (Decoded, error) {
	return Decode("sonyflake", s, epoch) // the epoch checked as Decode checks it
}

func decodeSonyflake(s string, epoch int64) (Decoded, error) {
	if epoch == 0 {
		epoch = SonyflakeEpoch
	}
	id, err := Parse(s)
	if err != nil {
		return Decoded{}, err
	}
	v := int64(id)
	return Decoded{Scheme: "sonyflake", ID: id.String(), Time: time.UnixMilli(epoch + (v>>24)*10).UTC(),
		Fields: []Field{{"seq", v >> 16 & 255}, {"machine", v & 0xffff}}}, nil
}

// DecodeUUIDv7 reads an RFC 9562 version 7 UUID in its canonical
// 8-4-4-4-12 form (any case, optionally in braces or as a urn:uuid:) or as
// 32 hex digits. Fields: rand_a (12 bits; a sub-millisecond fraction or
// counter in most generators) and rand_b (62 bits, hex).
func DecodeUUIDv7(s string) (Decoded, error) {
	b, err := parseUUID(s)
	if err != nil {
		return Decoded{}, err
	}
	if b[6]>>4 != 7 {
		return Decoded{}, fmt.Errorf("%w: %q is a version %d UUID, not 7", ErrMalformed, s, b[6]>>4)
	}
	if b[8]>>6 != 2 {
		return Decoded{}, fmt.Errorf("%w: %q has variant bits %02b, not 10 (RFC 9562)", ErrMalformed, s, b[8]>>6)
	}
	var ms int64
	for _, c := range b[:6] {
		ms = ms<<8 | int64(c)
	}
	randA := int64(b[6]&0x0f)<<8 | int64(b[7])
	randB := append([]byte{b[8] & 0x3f}, b[9:]...)
	return Decoded{Scheme: "uuidv7", ID: formatUUID(b), Time: time.UnixMilli(ms).UTC(),
		Fields: []Field{{"rand_a", randA}, {"rand_b", hex.EncodeToString(randB)}}}, nil
}

func parseUUID(s string) ([16]byte, error) {
	var b [16]byte
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(strings.ToLower(t), "urn:uuid:")
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		t = t[1 : len(t)-1]
	}
	if len(t) == 36 {
		if t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
			return b, fmt.Errorf("%w: %q is not a UUID (want 8-4-4-4-12 hex digits)", ErrMalformed, s)
		}
		t = t[:8] + t[9:13] + t[14:18] + t[19:23] + t[24:]
	}
	if len(t) != 32 {
		return b, fmt.Errorf("%w: %q is not a UUID (want 8-4-4-4-12 hex digits)", ErrMalformed, s)
	}
	if _, err := hex.Decode(b[:], []byte(t)); err != nil {
		return b, fmt.Errorf("%w: %q is not a UUID (want 8-4-4-4-12 hex digits)", ErrMalformed, s)
	}
	return b, nil
}

func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// crockford is the ULID alphabet: Crockford's base32 without I, L, O, U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// DecodeULID reads a ULID: 26 characters of Crockford base32 (any case), 48
// bits of Unix milliseconds then 80 random bits (field random, hex).
func DecodeULID(s string) (Decoded, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if len(t) != 26 {
		return Decoded{}, fmt.Errorf("%w: %q is not a ULID (want 26 characters)", ErrMalformed, s)
	}
	// 26 characters are 130 bits; the first holds the top 3 bits of 128,
	// so it is at most 7 (the spec's largest ULID is 7ZZZZZZZZZZZZZZZZZZZZZZZZZ).
	if t[0] > '7' {
		return Decoded{}, fmt.Errorf("%w: %q overflows 128 bits (first character above 7)", ErrMalformed, s)
	}
	var b [17]byte // 130 bits, big-endian, left-padded
	for _, c := range []byte(t) {
		v := strings.IndexByte(crockford, c)
		if v < 0 {
			return Decoded{}, fmt.Errorf("%w: %q has %q, not a Crockford base32 digit of a ULID", ErrMalformed, s, c)
		}
		carry := v
		for i := len(b) - 1; i >= 0; i-- {
			x := int(b[i])<<5 | carry
			b[i] = byte(x)
			carry = x >> 8
		}
	}
	var ms int64
	for _, c := range b[1:7] {
		ms = ms<<8 | int64(c)
	}
	return Decoded{Scheme: "ulid", ID: t, Time: time.UnixMilli(ms).UTC(),
		Fields: []Field{{"random", hex.EncodeToString(b[7:])}}}, nil
}

// DecodeObjectID reads a MongoDB ObjectId: 24 hex digits (optionally in
// ObjectId("...")). Fields: random (5 bytes, hex; per process since MongoDB
// 3.4), machine and process (the same 5 bytes as the 3-byte machine and
// 2-byte process id of older drivers) and counter (3 bytes).
func DecodeObjectID(s string) (Decoded, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "ObjectId(") && strings.HasSuffix(t, ")") {
		t = strings.Trim(t[len("ObjectId("):len(t)-1], `"'`)
	}
	var b [12]byte
	if len(t) != 24 {
		return Decoded{}, fmt.Errorf("%w: %q is not an ObjectId (want 24 hex digits)", ErrMalformed, s)
	}
	if _, err := hex.Decode(b[:], []byte(strings.ToLower(t))); err != nil {
		return Decoded{}, fmt.Errorf("%w: %q is not an ObjectId (want 24 hex digits)", ErrMalformed, s)
	}
	sec := int64(b[0])<<24 | int64(b[1])<<16 | int64(b[2])<<8 | int64(b[3])
	return Decoded{Scheme: "objectid", ID: hex.EncodeToString(b[:]), Time: time.Unix(sec, 0).UTC(),
		Fields: []Field{
			{"random", hex.EncodeToString(b[4:9])},
			{"machine", int64(b[4])<<16 | int64(b[5])<<8 | int64(b[6])},
			{"process", int64(b[7])<<8 | int64(b[8])},
			{"counter", int64(b[9])<<16 | int64(b[10])<<8 | int64(b[11])},
		}}, nil
}
