// Package clustertest builds throwaway clusters on the shared test
// servers (internal/localpg) for the tests of shardmgr and its
// subpackages. It is imported only from _test.go files; _test.go helpers
// cannot be shared across packages, so they live here.
//
// It must never import the operator packages (install, migrate, verify,
// rebalance): their in-package tests import it. Each package's
// helpers_test.go adds what needs them (initCluster calls install.Init).
package clustertest
