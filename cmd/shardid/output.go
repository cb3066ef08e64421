package main

import (
	"encoding/json"
	"io"
	"strings"
)

// oneLine folds a multi-line error into one line for the terminal.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of args), which are usage errors too.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "required flag", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
