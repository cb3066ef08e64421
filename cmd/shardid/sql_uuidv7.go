package main

import (
	"fmt"

	"github.com/spf13/cobra"

	shsql "github.com/shardid/shardid/sql"
)

func newSQLUUIDv7Cmd() *cobra.Command {
	var schema string
	cmd := &cobra.Command{
		Use:   "uuidv7 [--schema S]",
		Short: "Print the SQL that installs uuidv7() and uuidv7_time(uuid)",
		Long: `Prints idempotent SQL that creates the schema (default public) and the
functions <schema>.uuidv7(), RFC 9562 version 7 UUIDs that strictly increase
within a session, and <schema>.uuidv7_time(uuid). On PostgreSQL 18 and later
<schema>.uuidv7() calls the built-in uuidv7() (docs/schemes.md says how they
differ); before 18 it is PL/pgSQL.

  shardid sql uuidv7 --schema ids | psql -v ON_ERROR_STOP=1 mydb
  CREATE TABLE events (id uuid PRIMARY KEY DEFAULT ids.uuidv7(), ...);`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := shsql.RenderUUIDv7(schema)
			if err != nil {
				return usageError{err}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&schema, "schema", shsql.DefaultUUIDv7Schema, "schema to install into")
	return cmd
}
