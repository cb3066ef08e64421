package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// oneLine folds a multi-line error into one line for the terminal.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}

// isUsageError reports whether err wraps our usageError (exit 2): bad
// input a command refuses, a flag that does not parse (SetFlagErrorFunc)
// or arguments cobra refuses (markUsageErrors), told apart by type, not
// by cobra's wording.
func isUsageError(err error) bool {
	var ue usageError
	return errors.As(err, &ue)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
