// Package stamp tells from stats alone that a build asked again would
// change nothing. A Stamp records the state (size, times, inode, mode) of
// every file and directory a build could have read or written: the
// workspace as loading walks it, the sources its actions read, the files
// loading read, and its outputs. When none of them has changed since a
// build that succeeded, the same build asked again, with the same rbs, the
// same flags and the same environment, would load, analyse and look up the
// same actions and find its outputs in place, so it need not: a no-op
// build is a stat of each of these files.
package stamp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rbs-build/rbs/rbe/gobfile"
)

// Stamp is the recorded state of a build's files.
type Stamp struct {
	// Files maps each absolute path to its state; a symbolic link is
	// recorded as itself and, under its path with " ->" added, as what it
	// points to.
	Files map[string]State
	// Summary is what the build reported.
	Summary Summary
}

// Summary is what a build reported, for a build found up to date to say.
type Summary struct {
	Targets, Actions int
	// Internal counts the actions that run no process (rbs writes or
	// copies their file itself).
	Internal int
	// Outputs is the listing of the targets' outputs the build printed.
	Outputs string
	// Debug is what print() printed while the build loaded and analysed
	// its targets, which a build answered without loading prints again,
	// as Bazel replays it.
	Debug string
}

// State is what a stat says of a file; Missing marks one that was not
// there. A file changed less than racy before it was recorded could change
// again within the same tick of the file system's clock, keeping its
// times and perhaps its size: Content then also holds a digest of what it
// held (a file's bytes, a directory's names, a link's target), which a
// later check compares.
type State struct {
	Mode         uint32
	Size         int64
	Mtime, Ctime int64
	Ino          uint64
	Missing      bool
	Content      string
}

// racy is how recent a change must be for a stat alone not to tell it from
// a later one: well above the tick of any local file system's clock.
const racy = 2 * time.Second

// New returns an empty Stamp.
func New() *Stamp { return &Stamp{Files: map[string]State{}} }

// stat returns the state of the file at p, not following a last symbolic
// link when lstat is set.
func stat(p string, lstat bool) State {
	var st syscall.Stat_t
	var err error
	if lstat {
		err = syscall.Lstat(p, &st)
	} else {
		err = syscall.Stat(p, &st)
	}
	if err != nil {
		return State{Missing: true}
	}
	return State{
		Mode: st.Mode, Size: st.Size, Ino: st.Ino,
		Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		Ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}
}

// Add records the files at the absolute paths ps: a directory as itself,
// which changes when an entry is added to it or removed, not what it holds.
func (s *Stamp) Add(ps ...string) error {
	for _, p := range ps {
		if err := s.record(p); err != nil {
			return err
		}
	}
	return nil
}

// None is a Walk's skip that skips nothing.
func None(string, bool) bool { return false }

// Walk records root and everything under it but the entries skip names
// (root itself is walked whatever its name). A directory's state changes
// when an entry is added to it, removed or renamed, so a later Changed sees
// a new file wherever it appears.
func (s *Stamp) Walk(root string, skip func(name string, dir bool) bool) error {
	if err := s.record(root); err != nil {
		return err
	}
	if st := s.Files[root]; st.Missing || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if skip(e.Name(), e.IsDir()) {
			continue
		}
		if e.IsDir() {
			if err := s.Walk(p, skip); err != nil {
				return err
			}
			continue
		}
		if err := s.record(p); err != nil {
			return err
		}
	}
	return nil
}

// record records the state of p, and of what it points to if it is a
// symbolic link.
func (s *Stamp) record(p string) error {
	if !filepath.IsAbs(p) {
		return errors.New("stamp: a relative path: " + p)
	}
	now := time.Now().UnixNano()
	st := stat(p, true)
	if !st.Missing && max(st.Mtime, st.Ctime) > now-int64(racy) {
		st.Content = content(p, st)
	}
	s.Files[p] = st
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		target := stat(p, false)
		if !target.Missing && max(target.Mtime, target.Ctime) > now-int64(racy) {
			target.Content = content(p, target)
		}
		s.Files[p+" ->"] = target
	}
	return nil
}

// content is a digest of what the file at p, of state st, holds: its
// bytes, its names if a directory, its target if a symbolic link; "" when
// it cannot be read (the stat then decides).
func content(p string, st State) string {
	h := sha256.New()
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		entries, err := os.ReadDir(p)
		if err != nil {
			return ""
		}
		for _, e := range entries {
			h.Write([]byte(e.Name() + "\x00"))
		}
	case syscall.S_IFLNK:
		target, err := os.Readlink(p)
		if err != nil {
			return ""
		}
		h.Write([]byte(target))
	case syscall.S_IFREG:
		f, err := os.Open(p)
		if err != nil {
			return ""
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return ""
		}
	default:
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Changed reports whether any recorded file is not as it was recorded.
func (s *Stamp) Changed() bool { return len(s.check(true)) > 0 }

// Changes returns the paths of the recorded files that are not as they
// were recorded (a link's path when what it points to has changed).
func (s *Stamp) Changes() []string {
	ps := s.check(false)
	for i, p := range ps {
		ps[i], _ = cutLink(p)
	}
	return ps
}

// check returns the names of the recorded files that have changed, or
// with first only one of them. The files are stated by as many goroutines
// as run at once: a no-op build is thousands of stats.
func (s *Stamp) check(first bool) []string {
	names := make([]string, 0, len(s.Files))
	for p := range s.Files {
		names = append(names, p)
	}
	const chunk = 128
	var next, found atomic.Int64
	var mu sync.Mutex
	var out []string
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(names)/chunk+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(names) || first && found.Load() > 0 {
					return
				}
				for _, p := range names[lo:min(lo+chunk, len(names))] {
					if changed(p, s.Files[p]) {
						found.Add(1)
						mu.Lock()
						out = append(out, p)
						mu.Unlock()
						if first {
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// changed reports whether the file recorded under name is not as was says.
func changed(name string, was State) bool {
	target, link := cutLink(name)
	now := stat(target, !link)
	now.Content = was.Content
	return now != was || was.Content != "" && content(target, now) != was.Content
}

// cutLink returns the path of a recorded name and whether it names what a
// link points to.
func cutLink(name string) (string, bool) {
	if n := len(name); n > 3 && name[n-3:] == " ->" {
		return name[:n-3], true
	}
	return name, false
}

// Save writes the stamp to file, atomically.
func (s *Stamp) Save(file string) error { return gobfile.Save(file, s) }

// Load reads the stamp in file; a missing file is fs.ErrNotExist.
func Load(file string) (*Stamp, error) {
	s := New()
	if err := gobfile.Load(file, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Remove deletes the stamp in file, if there is one.
func Remove(file string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
