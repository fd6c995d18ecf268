package lockctl

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// foregroundTTY returns stdin's descriptor when it is a terminal whose
// foreground job is lockctl's process group. COMMAND, which runs in a
// process group of its own, is then made the foreground job, so that it
// can read the terminal and gets the terminal's ^C itself (lockctl then
// does not see it, and does not forward a second one).
func foregroundTTY(stdin io.Reader) (int, bool) {
	f, ok := stdin.(*os.File)
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pg != unix.Getpgrp() {
		return 0, false
	}
	return fd, true
}

// reclaimTTY makes lockctl's process group the terminal's foreground job
// again once COMMAND has ended. lockctl is a background job at that point,
// so SIGTTOU is ignored around the call, as shells do.
func reclaimTTY(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
}
