package limits

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrFileTooLarge is wrapped by the error for a file (the cluster file, a
// migration) larger than shardid reads.
var ErrFileTooLarge = errors.New("file too large")

// ReadLimited reads the file at path, refusing one larger than limit
// bytes without reading more than limit+1 of them.
func ReadLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, TooLarge(path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err // an *fs.PathError: it says "read PATH" already
	}
	if int64(len(data)) > limit {
		return nil, TooLarge(path, limit)
	}
	return data, nil
}

// TooLarge is the error for name, larger than limit bytes.
func TooLarge(name string, limit int64) error {
	return fmt.Errorf("%s: %w: more than %s (is it the right file?)", name, ErrFileTooLarge, ByteSize(limit))
}

// ByteSize writes n for a message.
func ByteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
