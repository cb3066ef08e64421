package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/shardid/shardid/shardmgr"
)

// addClusterConfigFlag adds --config (default shardid.yaml, or
// SHARDID_CONFIG) to a cluster command and returns where its value lands.
func addClusterConfigFlag(cmd *cobra.Command) *string {
	def := shardmgr.DefaultConfigPath
	if env := os.Getenv("SHARDID_CONFIG"); env != "" {
		def = env
	}
	path := new(string)
	cmd.Flags().StringVar(path, "config", def, "cluster file (env SHARDID_CONFIG)")
	return path
}

// loadCluster reads and checks the cluster file: one clear error when it
// is bad.
func loadCluster(path string) (*shardmgr.Config, error) {
	cfg, err := shardmgr.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.ValidateCluster(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// progressBar draws a bar on w when w is a terminal; otherwise it does
// nothing. It is safe for concurrent use.
type progressBar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	on    bool
	drawn bool
}

func newProgressBar(w io.Writer, label string) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{w: w, label: label, on: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) Update(done, total int) {
	if !p.on || total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	const width = 30
	filled := done * width / total
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total)
	p.drawn = true
}

// Done ends the bar's line.
func (p *progressBar) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
