// Package ternsplit is tern's SQL statement splitter (MIT, see split.go),
// so that shardid splits a disable-tx migration exactly as tern does.
//
// It must never change how a statement is split: the plain tern CLI and
// shardid run the same statements.
package ternsplit
