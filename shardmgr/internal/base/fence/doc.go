// Package fence holds the SQL of a shard's fence: the trigger that makes a
// copy refuse writes (SQLSTATE SQLState), the counter clamp that stops its
// generator, and the names of moved shards' retired copies.
//
// It must never import the shardmgr root (the root's router imports it to
// recognise a fenced shard's refusal) and never touch the catalog.
package fence
