// Package envvar expands ${VAR} references in configuration values: the
// one expander the cluster file (shardmgr), the router (DSNs read from the
// catalog) and serve's sections (segments:, snowflake:) share.
package envvar

import "regexp"

// ref matches a ${VAR} reference; a bare $ (in a password, say) is left
// alone.
var ref = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// Expand replaces each ${VAR} in s with lookup's value (nil lookup: none
// is set) and returns the names it found no value for, which expand to "".
// Whether a missing one is an error is the caller's to say (a cluster
// file's is; see its users).
func Expand(s string, lookup func(string) (string, bool)) (string, []string) {
	var missing []string
	out := ref.ReplaceAllStringFunc(s, func(r string) string {
		name := r[2 : len(r)-1]
		if lookup != nil {
			if v, ok := lookup(name); ok {
				return v
			}
		}
		missing = append(missing, name)
		return ""
	})
	return out, missing
}
