package main

import (
	"fmt"

	"github.com/spf13/cobra"

	shsql "github.com/shardid/shardid/sql"
)

func newSQLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sql",
		Short: "Print the SQL that shardid installs",
		Args:  cobra.NoArgs,
	}
	var p shsql.Params
	fn := &cobra.Command{
		Use:   "function --shard N [--schema NAME] [--variant safe|instagram] [--epoch MS] [--generator auto|plpgsql|c]",
		Short: "Print the SQL that installs the id generator for one logical shard",
		Long: `Prints idempotent SQL that creates the shard's schema (default shard_NNNN), its
generator <schema>.next_id() and the helpers id_time, id_shard and id_seq, in
one transaction. Run it with psql (not inside a transaction of your own);
running it again never resets the counter. It refuses to replace anything in a
schema where another role owns one of the generator's objects. --generator
picks the form of the safe generator's next_id(): auto (the C one of the
shardid extension where it is created in the database and the role is a
superuser, the PL/pgSQL one elsewhere), plpgsql, or c (an error where it
cannot be installed; see ext/shardid/README.md).

  shardid sql function --shard 5 | psql -v ON_ERROR_STOP=1 mydb
  CREATE TABLE shard_0005.likes (id bigint PRIMARY KEY DEFAULT shard_0005.next_id(), ...);`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("shard") {
				return usagef("--shard is required")
			}
			out, err := shsql.RenderScript(p)
			if err != nil {
				return usageError{err}
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	fn.Flags().IntVar(&p.Shard, "shard", 0, "logical shard id (0..8191 in the default layout)")
	fn.Flags().StringVar(&p.Schema, "schema", "", "schema to install into (default shard_ plus the id padded to 4 digits)")
	fn.Flags().StringVar(&p.Variant, "variant", shsql.Safe, "generator variant: safe or instagram")
	fn.Flags().Int64Var(&p.Epoch, "epoch", shsql.DefaultEpoch, "epoch in milliseconds since 1970-01-01")
	fn.Flags().StringVar(&p.Generator, "generator", shsql.GeneratorAuto, "form of the safe generator: auto, plpgsql or c (the shardid extension's)")
	cmd.AddCommand(fn, newSQLUUIDv7Cmd())
	return cmd
}
