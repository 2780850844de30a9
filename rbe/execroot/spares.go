package execroot

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Spares hands out the directories commands run in, under one parent, and
// keeps those given back emptied to hand out again. On a worker that runs
// many short jobs, making a directory and removing it again was a fifth of
// its CPU: ext4 searches for a free inode on each mkdir and frees it on
// each rmdir. A directory is named for the order it was made in, not for
// what runs in it, so that it need not be renamed either.
//
// A directory may be kept only once nothing that ran in it can still run
// (its memory group was found empty) and only where every command runs as
// the same user: a process left running in it, or a descriptor of it
// handed on, would reach the next command's files.
type Spares struct {
	parent string

	mu   sync.Mutex
	free []string // kept directories, empty
	made int      // the N of the last run-N made
}

// MaxSpares bounds how many emptied directories a Spares keeps.
const MaxSpares = 64

// NewSpares returns a Spares for directories in parent, which must exist
// and hold nothing named run-N.
func NewSpares(parent string) *Spares { return &Spares{parent: parent} }

// Take returns a directory of mode 0700 in parent, named run-N, for the
// caller alone until it gives it back: a kept one, or one made anew.
func (s *Spares) Take() (string, error) {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		dir := s.free[n-1]
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return dir, nil
	}
	s.made++
	dir := filepath.Join(s.parent, "run-"+strconv.Itoa(s.made))
	s.mu.Unlock()
	return dir, os.Mkdir(dir, 0o700)
}

// Give takes back a directory Take returned. With keep, it empties it and
// keeps it for a later Take; otherwise, or where that fails, or with
// MaxSpares kept already, it removes it.
func (s *Spares) Give(dir string, keep bool) {
	if keep && emptyDir(dir) == nil {
		s.mu.Lock()
		kept := len(s.free) < MaxSpares
		if kept {
			s.free = append(s.free, dir)
		}
		s.mu.Unlock()
		if kept {
			return
		}
	}
	os.RemoveAll(dir)
}

// emptyDir removes what the directory dir holds and gives it mode 0700,
// and no ACL, again; dir itself must not be a symlink.
func emptyDir(dir string) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	// An ACL the command set on its directory would reach the next
	// command's files.
	for _, acl := range []string{"system.posix_acl_access", "system.posix_acl_default"} {
		if err := unix.Fremovexattr(int(f.Fd()), acl); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
	}
	info, err := f.Stat()
	if err != nil || info.Mode().Perm() == 0o700 {
		return err
	}
	return f.Chmod(0o700)
}
