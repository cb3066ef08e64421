package localpg

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server if this process dies, so a
// crashed test leaves no server behind.
func dieWithParent(cmd *exec.Cmd) { cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL }
