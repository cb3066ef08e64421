// Package engine is the layer of the shard manager built on the root
// package and the handle: the packages under shardmgr/internal/engine
// write the catalog (catalog: its one writer), edit a cluster file in
// place (clusterfile) and read and prove each host's own record of itself
// (hostidentity). The migration engine belongs to this layer too, but is
// public, shardmgr/migrate: its types are in the options of install and
// rebalance. This folder holds no code of its own; this file says what its
// packages (and shardmgr/migrate) may import.
//
// Who may import them: the operator packages (install, verify,
// rebalance, hosts, repair, audit), the test fixtures and tests. Never
// the root package or the handle: both lie below, and the engine imports
// them.
//
// What they may import: one another, the root package (for its types),
// the handle (shardmgr/cluster), the base layer (shardmgr/internal/base)
// and what lies outside shardmgr below it. Never an operator package (the
// operators share the engine without importing one another) or a test
// fixture (shardmgr/internal/testkit). shardmgr/layers_test.go holds
// these rules.
package engine
