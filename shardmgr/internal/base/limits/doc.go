// Package limits bounds what shardid reads from files: a cluster file or a
// migration larger than its limit is refused before it is read into memory.
// It must never import the shardmgr root package (the root imports it).
package limits
