package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardid/shardid/idgen"
	"github.com/shardid/shardid/internal/app/iddecode"
)

func newIDCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Decode and encode shardid ids",
		Long: `An id is a non-negative 64-bit integer: from the top, one 0 bit, 41 bits of
milliseconds since the epoch (Instagram's, 2011-08-24T21:07:01.721Z, unless
--epoch says otherwise), 13 bits of logical shard and 10 bits of sequence.
The sign bit doubles as the top time bit, so ids run out on 2046-06-27.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newIDDecodeCmd(), newIDEncodeCmd())
	return cmd
}

func newIDDecodeCmd() *cobra.Command {
	var asJSON bool
	var epoch int64
	var scheme string
	cmd := &cobra.Command{
		Use:   "decode [--layout L] [--json] [--epoch MS] ID...",
		Short: "Print the time, shard and sequence of ids (or the parts of other schemes' ids)",
		Long: `Prints one line per id: the id, its time (RFC 3339, UTC, milliseconds), its
logical shard and its sequence number. With --json, prints a JSON array of
{"id":"<decimal>","time":"...","shard":N,"seq":N}.

--layout reads the ids of other schemes instead (see docs/schemes.md):
` + layoutHelp() + `
For those, each line is the id, its time and name=value pairs, and --json
prints {"id":"...","layout":"...","time":"...", then the same pairs}.
--epoch applies to the 64-bit layouts; its default is the layout's own.

  shardid id decode 4041150592192615424
  shardid id decode --json 4041150592192615424 4041150592192615425
  shardid id decode --layout snowflake --epoch 1420070400000 175928847299117063
  shardid id decode --layout uuidv7 017F22E2-79B0-7CC3-98C4-DC0C0C07398F`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if scheme != "instagram" {
				if !cmd.Flags().Changed("epoch") {
					epoch = 0
				}
				return decodeOther(cmd, scheme, epoch, asJSON, args)
			}
			// Every argument is checked before anything is printed, so a
			// script never gets half an answer.
			out, err := iddecode.DecodeOwn(epoch, args)
			if err != nil {
				return usageError{err}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, out)
			}
			for _, d := range out {
				if _, err := fmt.Fprintf(w, "%d %s shard=%d seq=%d\n", d.ID, d.Time, d.Shard, d.Seq); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	cmd.Flags().Int64Var(&epoch, "epoch", idgen.DefaultEpoch, "epoch in milliseconds since 1970-01-01 (0 means the default)")
	cmd.Flags().StringVar(&scheme, "layout", "instagram", "id layout: "+strings.Join(idgen.Schemes(), ", "))
	cmd.SetFlagErrorFunc(negativeIDFlagError)
	return cmd
}

// negativeIDFlagError explains `decode -123`: pflag reads a negative id as
// a cluster of unknown short flags, which would confuse the user.
func negativeIDFlagError(_ *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if s := ne.GetSpecifiedShortnames(); s != "" && s[0] >= '0' && s[0] <= '9' {
			if _, perr := idgen.Parse("-" + s); perr != nil {
				return usageError{perr}
			}
		}
	}
	return usageError{err}
}

func newIDEncodeCmd() *cobra.Command {
	var (
		at         string
		shard, seq int64
		epoch      int64
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "encode --time RFC3339 --shard N --seq S [--epoch MS] [--json]",
		Short: "Print the id for a time, shard and sequence number",
		Long: `Prints the decimal id made of the time (truncated to the millisecond), the
logical shard and the sequence number. Values outside the layout are refused,
never wrapped into neighbouring bits. With --json, prints the object that
'id decode --json' prints for the id: {"id":"<decimal>","time":"...","shard":N,"seq":N}
(the time as the id holds it, truncated to the millisecond).

  shardid id encode --time 2026-11-29T14:31:52.784Z --shard 5 --seq 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range []string{"time", "shard", "seq"} {
				if !cmd.Flags().Changed(name) {
					return usagef("--%s is required", name)
				}
			}
			t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(at))
			if err != nil {
				return usagef("--time %q: want RFC 3339, e.g. 2026-11-29T14:31:52.784Z", at)
			}
			layout := idgen.Layout{Epoch: epoch}
			id, err := layout.Compose(t, shard, seq)
			if err != nil {
				return usageError{err}
			}
			if asJSON {
				p, err := layout.Decompose(id)
				if err != nil {
					return err
				}
				return writeJSON(cmd.OutOrStdout(), iddecode.PartsOf(p))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), id)
			return err
		},
	}
	cmd.Flags().StringVar(&at, "time", "", "time of the id, RFC 3339 (e.g. 2026-11-29T14:31:52.784Z)")
	cmd.Flags().Int64Var(&shard, "shard", 0, "logical shard id (0..8191 in the default layout)")
	cmd.Flags().Int64Var(&seq, "seq", 0, "sequence number (0..1023 in the default layout)")
	cmd.Flags().Int64Var(&epoch, "epoch", idgen.DefaultEpoch, "epoch in milliseconds since 1970-01-01 (0 means the default)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the id and its parts as a JSON object")
	return cmd
}
