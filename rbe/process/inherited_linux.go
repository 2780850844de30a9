package process

import (
	"errors"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SealInherited marks every descriptor of this process above stderr
// close-on-exec, so that a payload gets the descriptors it is given and no
// others. What started the process (a shell, a supervisor, a test harness)
// may have left some open without the flag, and every payload would
// inherit them: a pipe to another program, a file the payload's user may
// not read. Go opens its own with the flag already, so nothing this
// process opens later is changed. Slurm's slurmd closes them at its start.
func SealInherited() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return sealListed() // before Linux 5.11
	}
	return err
}

// sealListed is SealInherited for each descriptor /proc lists.
func sealListed() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if errors.Is(err, unix.EBADF) {
			continue // the directory ReadDir read, closed since
		}
		if err == nil {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
