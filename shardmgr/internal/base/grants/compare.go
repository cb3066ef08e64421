package grants

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Compare names how copy's privileges differ from want's, one line per
// object: owners (the toolkit's objects aside), privileges of the objects
// both hold and of their columns, default privileges and row-level
// security. Nil when they agree.
func Compare(want, copy *Schema) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(union(want.Objects, copy.Objects))) {
		w, c := want.Objects[k], copy.Objects[k]
		if w == nil && c != nil && c.Kind == "COLUMN" {
			w = &Object{Kind: c.Kind, Name: c.Name, Column: c.Column}
		}
		if c == nil && w != nil && w.Kind == "COLUMN" {
			c = &Object{Kind: w.Kind, Name: w.Name, Column: w.Column}
		}
		if w == nil || c == nil {
			continue
		}
		var d []string
		if !w.Toolkit && !c.Toolkit && w.Alter != "" && w.Owner != c.Owner {
			d = append(d, fmt.Sprintf("owner %s, not %s", c.Owner, w.Owner))
		}
		revoke, grant := aclDiff(w, c)
		d = append(d, entries("lacks", grant)...)
		d = append(d, entries("also has", revoke)...)
		if len(d) > 0 {
			out = append(out, strings.TrimSpace(strings.ToLower(w.Kind)+" "+strings.TrimPrefix(w.Key(), w.Kind+" "))+": "+strings.Join(d, ", "))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(union(want.Defaults, copy.Defaults)), func(a, b Default) int { return strings.Compare(a.String(), b.String()) }) {
		revoke, grant := entryDiff(want.Defaults[k], copy.Defaults[k])
		if d := append(entries("lacks", grant), entries("also has", revoke)...); len(d) > 0 {
			out = append(out, "default privileges "+k.String()+": "+strings.Join(d, ", "))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(want.RLS)) {
		if c, ok := copy.RLS[t]; ok && c != want.RLS[t] {
			out = append(out, fmt.Sprintf("table %s: row-level security %q, not %q", t, c, want.RLS[t]))
		}
	}
	return out
}

func entries(what string, es []Entry) []string {
	if len(es) == 0 {
		return nil
	}
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return []string{what + " " + strings.Join(s, " ")}
}
