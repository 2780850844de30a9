package process

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// User is the account build actions and batch jobs run as under
// `rbs remote worker --run-as`, resolved once when the worker starts.
//
// A payload that runs as the worker's own user can read what the worker
// can: its worker token file, its cache, the output of other jobs, and
// /proc/<worker pid>/environ, where RBS_WORKER_TOKEN may be. Run as another
// uid, it can read none of these: the kernel lets only the same uid (or
// CAP_SYS_PTRACE) read a process's environ, and the work dir is laid out
// (see Run) so that only a payload's own directory under it is open to it.
type User struct {
	Name     string
	UID, GID uint32
	// Groups are the supplementary groups payloads get (none when empty).
	Groups []uint32
	Home   string
}

// Credential is what payloads start with: nil for the worker's own user.
func (u *User) Credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// HandOver gives the directories of the tree at dir to u, so that the
// payload can create its outputs anywhere in it. The files stay the
// worker's: inputs are hard links into its cache, read-only to others.
func (u *User) HandOver(dir string) error {
	if u == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Lchown(p, int(u.UID), int(u.GID))
	})
}

// GiveFiles gives the files of the tree at dir to u: a restored
// checkpoint's, copies that the payload may rewrite in place.
func (u *User) GiveFiles(dir string) error {
	if u == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return os.Lchown(p, int(u.UID), int(u.GID))
	})
}

// Reclaim takes the directories of the tree at dir back from u, top down,
// before the worker reads the outputs there: a process the payload left
// running could otherwise swap an output, between the worker's checks and
// its reads, for a symlink to a file only the worker may read. Each
// directory is the worker's, closed to others' writes, before its entries
// are listed, so none of them can change from then on.
func (u *User) Reclaim(dir string) error {
	if u == nil {
		return nil
	}
	uid, gid := os.Getuid(), os.Getgid()
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return os.Chmod(p, info.Mode().Perm()&^0o022)
	})
}

// Reach checks that u may enter every directory from / down to dir, since
// payloads start in directories under it.
func (u *User) Reach(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for p := resolved; ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !u.mayEnter(info) {
			st := info.Sys().(*syscall.Stat_t)
			return fmt.Errorf("payloads run as %s (uid %d) cannot reach the work dir %s: %s (mode %#o, uid %d, gid %d) is closed to them; give a --work-dir whose parents they may enter, e.g. under /var/lib", u.Name, u.UID, dir, p, info.Mode().Perm(), st.Uid, st.Gid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// mayEnter reports whether u has search permission on a directory, by its
// owner, group or other bits as the kernel picks them (ACLs aside).
func (u *User) mayEnter(info fs.FileInfo) bool {
	st := info.Sys().(*syscall.Stat_t)
	perm := info.Mode().Perm()
	switch {
	case st.Uid == u.UID:
		return perm&0o100 != 0
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}
