package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// What a user's run of the README leaves in the clone (the cluster file
// and servers of shardid local up, the migrations copied, the rendered
// shard) and what the builds write are ignored by git, so a release built
// afterwards is not stamped "modified"; and git tracks no binary.
func TestRepoIgnoresRunAndBuildOutput(t *testing.T) {
	root := repoRoot(t)
	for _, p := range []string{"shardid.yaml", ".shardid/local.json", "shard-migrations/001_create_likes.sql",
		"shard5/001_create_likes.up.sql", "shardid", "router", "dist/SHA256SUMS", "bin/shardid"} {
		out, err := exec.Command("git", "-C", root, "check-ignore", "--no-index", "-q", p).CombinedOutput()
		require.NoError(t, err, "%s is not ignored by .gitignore: %s", p, out)
	}
	for _, p := range []string{"README.md", "cmd/shardid/main.go", "examples/shard-migrations/001_create_likes.sql"} {
		err := exec.Command("git", "-C", root, "check-ignore", "--no-index", "-q", p).Run()
		require.Error(t, err, "%s must not be ignored", p)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	require.NoError(t, err)
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		require.False(t, bytes.HasPrefix(b, []byte("\x7fELF")) || bytes.HasPrefix(b, []byte{0xcf, 0xfa, 0xed, 0xfe}),
			"git tracks the binary %s", f)
	}
}

// make install puts a working shardid in PREFIX/bin, and the README says
// so where it first runs shardid.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary")
	}
	root := repoRoot(t)
	prefix := t.TempDir()
	out, err := exec.Command("make", "-C", root, "install", "PREFIX="+prefix).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "installed "+filepath.Join(prefix, "bin", "shardid"))
	require.Contains(t, string(out), "is not on PATH")
	v, err := exec.Command(filepath.Join(prefix, "bin", "shardid"), "version").CombinedOutput()
	require.NoError(t, err, "%s", v)
	require.Contains(t, string(v), "shardid")

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	first := strings.Index(string(readme), "shardid local up")
	require.Positive(t, first)
	require.True(t, strings.Contains(string(readme[:first]), "make install"), "the README installs the binary (make install) before its first shardid command")
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}
