// Package testkit is the top layer of the shard manager, and only for
// tests: the packages under shardmgr/internal/testkit build throwaway
// clusters on the shared test servers (clustertest) and clusters that
// init has installed (installtest). This folder holds no code of its own;
// this file says what its packages may import.
//
// Who may import them: _test.go files only. No package's own code does,
// so that a program that imports shardmgr never links a test server.
//
// What they may import: anything of shardmgr and the test servers of
// internal/localpg. clustertest imports no operator package, since their
// in-package tests import it; installtest imports install, and package
// install's own tests keep their helper instead. shardmgr/layers_test.go
// holds these rules.
package testkit
