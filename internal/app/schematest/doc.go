// Package schematest brings a test catalog to the schema states the upgrade
// policy (docs/upgrading.md) is about: newer, dirty, older. It is imported
// only from _test.go files.
//
// It is test tooling built on shardmgr, so it lives with the CLI's tools in
// internal/app rather than with the foundations in internal/, which never
// import shardmgr.
package schematest
