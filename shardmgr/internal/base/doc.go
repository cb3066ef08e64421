// Package base is the lowest layer of the shard manager: the packages
// under shardmgr/internal/base hold the small PostgreSQL helpers (pg), the
// read limits (limits), the SQL of a shard's fence (fence), of the objects
// inside a shard schema (shardschema) and of its grants (grants), and
// tern's statement splitter (ternsplit). This folder holds no code of its
// own; this file says what its packages may import.
//
// Who may import them: every package of shardmgr, the root package (its
// router uses pg, limits and fence) included.
//
// What they may import: one another, and what lies outside shardmgr
// below it (idgen, sql, migrations, the foundations under internal/).
// Never the shardmgr root, the handle (shardmgr/cluster), the engine
// (shardmgr/internal/engine), an operator package or a test fixture
// (shardmgr/internal/testkit): the root imports them, so each of those
// would be an import cycle or a layer turned upside down.
// shardmgr/layers_test.go holds these rules.
package base
