package segment

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrFormat is wrapped by the errors of CompileFormat for a bad template.
var ErrFormat = errors.New("bad id format")

// ErrMalformedID is wrapped by the errors of Format.Parse for an id the
// format cannot have produced.
var ErrMalformedID = errors.New("malformed id")

// Format renders a number into a business id and parses it back. A
// template is literal text with these fields:
//
//	{seq}       the number in decimal; {seq:10} zero-padded to 10 digits
//	{date}      the UTC date the id was handed out, as 20261129
//	{bucket:2}  a 2-digit bucket derived from a user key (or, without a
//	            key, from the number), for routing and spreading
//
// {seq} must appear exactly once; the others at most once. For example
// "ORD-{date}-{bucket:2}-{seq:10}" renders ORD-20261129-07-0000012345.
// A Format is immutable and safe for concurrent use.
type Format struct {
	template string
	parts    []formatPart
	buckets  int
}

type fieldKind uint8

const (
	literal fieldKind = iota
	fieldSeq
	fieldDate
	fieldBucket
)

type formatPart struct {
	kind  fieldKind
	text  string // literal
	width int    // seq: minimum width, bucket: exact width
}

// Parts are the fields of a formatted id.
type Parts struct {
	Seq    int64
	Date   time.Time // zero when the format has no {date}
	Bucket int       // -1 when the format has no {bucket}
}

// CompileFormat checks a template and prepares it for rendering.
func CompileFormat(template string) (*Format, error) {
	f := &Format{template: template}
	bad := func(msg string, args ...any) (*Format, error) {
		return nil, fmt.Errorf("%w %q: %s", ErrFormat, template, fmt.Sprintf(msg, args...))
	}
	counts := map[fieldKind]int{}
	for rest := template; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			f.parts = append(f.parts, formatPart{kind: literal, text: rest})
			break
		}
		if rest[open] == '}' {
			return bad("unmatched }")
		}
		if open > 0 {
			f.parts = append(f.parts, formatPart{kind: literal, text: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return bad("unclosed {")
		}
		field := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		name, arg, hasArg := strings.Cut(field, ":")
		p := formatPart{}
		switch name {
		case "seq":
			p.kind = fieldSeq
		case "date":
			p.kind = fieldDate
		case "bucket":
			p.kind = fieldBucket
		default:
			return bad("unknown field {%s}", field)
		}
		if hasArg {
			w, err := strconv.Atoi(arg)
			if err != nil || w < 1 || w > 19 || p.kind == fieldDate {
				return bad("bad width in {%s}", field)
			}
			if p.kind == fieldBucket && w > 9 {
				return bad("{bucket} has at most 9 digits")
			}
			p.width = w
		} else if p.kind == fieldBucket {
			return bad("{bucket} needs a width, e.g. {bucket:2}")
		}
		counts[p.kind]++
		f.parts = append(f.parts, p)
	}
	if counts[fieldSeq] != 1 {
		return bad("{seq} must appear exactly once")
	}
	if counts[fieldDate] > 1 || counts[fieldBucket] > 1 {
		return bad("{date} and {bucket} may appear once each")
	}
	// The number has no fixed width, so a field of digits right after it
	// could not be told apart when parsing.
	for i, p := range f.parts {
		if p.kind == fieldSeq && i+1 < len(f.parts) && f.parts[i+1].kind != literal {
			return bad("{seq} must be followed by literal text or end the id")
		}
		if p.kind == fieldSeq && i+1 < len(f.parts) && startsWithDigit(f.parts[i+1].text) {
			return bad("{seq} must not be followed by a digit")
		}
	}
	if err := f.setBuckets(0); err != nil {
		return nil, err
	}
	return f, nil
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// setBuckets sets the bucket count (0: 10^width).
func (f *Format) setBuckets(n int) error {
	i := slices.IndexFunc(f.parts, func(p formatPart) bool { return p.kind == fieldBucket })
	if i < 0 {
		if n != 0 {
			return fmt.Errorf("%w %q: buckets set but no {bucket:N} field", ErrFormat, f.template)
		}
		return nil
	}
	limit := 1
	for range f.parts[i].width {
		limit *= 10
	}
	if n == 0 {
		n = limit
	}
	if n > limit {
		return fmt.Errorf("%w %q: %d buckets do not fit in %d digits", ErrFormat, f.template, n, f.parts[i].width)
	}
	f.buckets = n
	return nil
}

// String returns the template.
func (f *Format) String() string { return f.template }

// Bucket returns the bucket of a user key (FNV-1a), or of the number when
// key is empty.
func (f *Format) Bucket(seq int64, key string) int {
	if f.buckets == 0 {
		return -1
	}
	if key == "" {
		return int(uint64(seq) % uint64(f.buckets))
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(f.buckets))
}

// Append renders seq, handed out at time t, for a user key (may be empty)
// and appends it to dst.
func (f *Format) Append(dst []byte, seq int64, t time.Time, key string) []byte {
	for _, p := range f.parts {
		switch p.kind {
		case literal:
			dst = append(dst, p.text...)
		case fieldSeq:
			dst = appendPadded(dst, uint64(seq), p.width)
		case fieldDate:
			y, m, d := t.UTC().Date()
			dst = appendPadded(dst, uint64(y), 4)
			dst = appendPadded(dst, uint64(m), 2)
			dst = appendPadded(dst, uint64(d), 2)
		case fieldBucket:
			dst = appendPadded(dst, uint64(f.Bucket(seq, key)), p.width)
		}
	}
	return dst
}

// Render is Append to a new string.
func (f *Format) Render(seq int64, t time.Time, key string) string {
	return string(f.Append(make([]byte, 0, 32), seq, t, key))
}

func appendPadded(dst []byte, v uint64, width int) []byte {
	var buf [20]byte
	b := strconv.AppendUint(buf[:0], v, 10)
	for n := len(b); n < width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, b...)
}

// Parse splits an id rendered by f into its parts.
func (f *Format) Parse(id string) (Parts, error) {
	out := Parts{Bucket: -1}
	bad := func(msg string) (Parts, error) {
		return Parts{}, fmt.Errorf("%w %q for format %q: %s", ErrMalformedID, id, f.template, msg)
	}
	rest := id
	for _, p := range f.parts {
		switch p.kind {
		case literal:
			if !strings.HasPrefix(rest, p.text) {
				return bad(fmt.Sprintf("expected %q", p.text))
			}
			rest = rest[len(p.text):]
		case fieldSeq:
			n := digitsPrefix(rest)
			if n == 0 || n < p.width {
				return bad("sequence too short")
			}
			v, err := strconv.ParseInt(rest[:n], 10, 64)
			if err != nil {
				return bad("sequence out of range")
			}
			out.Seq, rest = v, rest[n:]
		case fieldDate:
			if digitsPrefix(rest) < 8 {
				return bad("expected a date yyyymmdd")
			}
			d, err := time.Parse("20060102", rest[:8])
			if err != nil {
				return bad("bad date")
			}
			out.Date, rest = d, rest[8:]
		case fieldBucket:
			if digitsPrefix(rest) < p.width {
				return bad("bucket too short")
			}
			v, _ := strconv.Atoi(rest[:p.width])
			if v >= f.buckets {
				return bad("bucket out of range")
			}
			out.Bucket, rest = v, rest[p.width:]
		}
	}
	if rest != "" {
		return bad("trailing text")
	}
	return out, nil
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
