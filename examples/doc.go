// Package examples holds programs that the documentation shows: each Go
// snippet in README.md and docs/*.md is a piece of one of them or of an
// Example function (an example_test.go), so that it compiles, and
// TestDocSnippetsAreCompiled keeps the text the documents show the same as
// the compiled source.
//
//   - router: the README's router example, run against a real cluster by
//     its test.
//   - python, node: docs/routing.md's programs for other languages (route a
//     key with shardid.routes, insert through the DEFAULT, decode the id,
//     follow a move), run by lang_test.go after scripts/ensure-examples.
package examples
