// Package jsonshape reduces a JSON document to its shape, the form the
// golden files of testdata/golden hold: the CLI's --json and the
// console's JSON are compared with the same files through it.
package jsonshape

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Of returns the shape of a JSON document as sorted lines "path: type":
// keys joined with ".", an array's elements under "path[]" (the shapes of
// all its elements merged), types string, number, bool, null, object and
// array; a path whose values differ in type lists them with "|". Values
// are left out, so that what changes from run to run (ids, times,
// durations) does not, and what does change (a key renamed, added or
// removed, a type changed) shows as a diff of the golden file.
func Of(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if dec.More() {
		return "", errors.New("more than one JSON value")
	}
	types := map[string][]string{}
	add := func(path, typ string) {
		if !slices.Contains(types[path], typ) {
			types[path] = append(types[path], typ)
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			add(path, "object")
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			add(path, "array")
			for _, x := range v {
				walk(path+"[]", x)
			}
		case string:
			add(path, "string")
		case json.Number:
			add(path, "number")
		case bool:
			add(path, "bool")
		case nil:
			add(path, "null")
		}
	}
	walk("$", v)
	var lines []string
	for path, ts := range types {
		slices.Sort(ts)
		lines = append(lines, path+": "+strings.Join(ts, "|"))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n", nil
}
