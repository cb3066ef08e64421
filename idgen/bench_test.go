package idgen

import (
	"testing"
	"time"
)

// Compose and Decompose validate the layout on every call; these show what
// that costs, so callers in hot paths can judge whether it matters.
func BenchmarkCompose(b *testing.B) {
	t := time.Date(2026, 11, 29, 14, 31, 52, 784e6, time.UTC)
	for b.Loop() {
		if _, err := Default.Compose(t, 5, 17); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComposeMillis(b *testing.B) {
	for b.Loop() {
		if _, err := Default.ComposeMillis(481742691063, 5, 17); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecompose(b *testing.B) {
	for b.Loop() {
		if _, err := Default.Decompose(4041150592192615424); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalJSON(b *testing.B) {
	in := []byte(`"4041150592192615424"`)
	var id ID
	for b.Loop() {
		if err := id.UnmarshalJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}
