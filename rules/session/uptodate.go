package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rules/stamp"
	"github.com/rbs-build/rbs/starlark/label"
)

// stampKey is all that decides a build besides the files its stamp
// records: this rbs binary, where and how it was asked, and the
// environment.
type stampKey struct {
	Rbs             string
	RbsState        stamp.State
	Root, Dir       string
	Patterns        []string
	Platform        string
	Defines         map[string]string
	Settings        map[string]string
	CompilationMode string
	Remote          string
	RemoteCache     bool
	KeepGoing       bool
	Env             []string
}

// shellNoise are variables a shell changes between commands that no build
// reads.
var shellNoise = []string{"_", "OLDPWD", "SHLVL"}

// stampFile is where the stamp of a build of patterns, as s is configured,
// is kept: in the cache directory, named by a digest of its key.
func (s *Session) stampFile(patterns []string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(shellNoise, name)
	})
	slices.Sort(env)
	key := stampKey{
		Rbs: exe, Root: s.ws.Root, Dir: s.opts.Dir, Patterns: patterns,
		Platform: s.ws.Platform.String(), Defines: s.opts.Defines, Settings: s.opts.Settings, CompilationMode: s.opts.CompilationMode,
		Remote: s.opts.Remote.Target, RemoteCache: s.opts.RemoteCache, KeepGoing: s.opts.KeepGoing, Env: env,
	}
	rbs := stamp.New()
	if err := rbs.Add(exe); err != nil {
		return "", err
	}
	key.RbsState = rbs.Files[exe]
	b, err := json.Marshal(key)
	if err != nil {
		return "", err
	}
	dir, err := s.cacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return filepath.Join(dir, "stamps", hex.EncodeToString(sum[:16])), nil
}

// UpToDate reports whether a build of patterns would change nothing: the
// last build of them, as s is configured, succeeded, and not one file it
// read or wrote has changed since. It returns that build's summary.
func (s *Session) UpToDate(patterns []string) (stamp.Summary, bool) {
	file, err := s.stampFile(patterns)
	if err != nil {
		return stamp.Summary{}, false
	}
	st, err := stamp.Load(file)
	if err != nil || st.Changed() {
		return stamp.Summary{}, false
	}
	return st.Summary, true
}

// beginStamp starts the stamp of a build of patterns: it forgets the last
// one, so that only a build that succeeds leaves one, and records the
// workspace as loading walks it.
func (s *Session) beginStamp(patterns []string) (*stamp.Stamp, string, error) {
	file, err := s.stampFile(patterns)
	if err != nil {
		return nil, "", err
	}
	if err := stamp.Remove(file); err != nil {
		return nil, "", err
	}
	// What the build makes in the workspace's own directory is made
	// first, so that the first build leaves a stamp too.
	if err := os.MkdirAll(filepath.Join(s.ws.Root, OutDir), 0o755); err != nil {
		return nil, "", err
	}
	s.linkBin()
	st := stamp.New()
	skip := func(name string, dir bool) bool { return dir && label.SkipDir(name) || name == BinLink }
	if err := st.Walk(s.ws.Root, skip); err != nil {
		return nil, "", err
	}
	return st, file, nil
}

// Remember keeps the stamp of the build sum reports, with what it printed
// of its outputs, so that the same build asked again finds it up to date
// (UpToDate). A build that saw a file change while it ran has none.
func (s *Session) Remember(sum *Summary, outputs string) error {
	if sum.stamp == nil {
		return nil
	}
	st := sum.Stats
	sum.stamp.Summary = stamp.Summary{Targets: len(sum.Targets), Actions: st.Total, Internal: st.Total - st.Executed - st.Cached, Outputs: outputs}
	return sum.stamp.Save(sum.stampFile)
}
