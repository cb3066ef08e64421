//go:build !linux

package localpg

import "os/exec"

// dieWithParent has no kernel support outside Linux: a server outlives a
// process that dies without calling Stop.
func dieWithParent(*exec.Cmd) {}
