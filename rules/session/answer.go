package session

import (
	"time"

	"github.com/rbs-build/rbs/rules/stamp"
	"github.com/rbs-build/rbs/starlark/label"
)

// A command that only loads or analyses (rbs query, rbs build --nobuild)
// prints what the workspace's BUILD and .bzl files, its directories'
// entries and the files analysis read decide, with its flags. What it
// printed is kept with a stamp of those files and directories: asked
// again, with none of them changed, it is printed as it was, nothing
// loaded. Editing a source file changes no directory's entries, and so no
// answer that did not read it.

// answerFile is where the answer to the command asked as args is kept.
// The key starts with a NUL, which no target pattern holds, so that no
// build's stamp is read as an answer.
func (s *Session) answerFile(args []string) (string, error) {
	return s.stampFile(append([]string{"\x00answer"}, args...))
}

// Answered returns what the command asked as args printed when last asked
// with s configured alike, if no file or directory it read has changed
// since.
func (s *Session) Answered(args ...string) (string, bool) {
	file, err := s.answerFile(args)
	if err != nil {
		return "", false
	}
	st, err := stamp.Load(file)
	if err != nil || len(st.Changes()) > 0 {
		return "", false
	}
	s.debug.replay(st.Summary.Debug)
	return st.Summary.Outputs, true
}

// Answer runs fn, which loads or analyses and returns what to print, and
// keeps that for Answered with the stamp of what it read: the workspace's
// directories as they were before, and the files loading and analysis
// read. A file changed since fn began, which it may have read either way,
// leaves nothing kept.
func (s *Session) Answer(args []string, fn func() (string, error)) (string, error) {
	file, err := s.answerFile(args)
	if err != nil {
		return "", err
	}
	if err := stamp.Remove(file); err != nil {
		return "", err
	}
	began := time.Now().UnixNano()
	st := stamp.New()
	dirsOnly := func(name string, dir bool) bool { return !dir || label.SkipDir(name) || name == BinLink }
	if err := st.Walk(s.ws.Root, dirsOnly); err != nil {
		return "", err
	}
	out, err := fn()
	if err != nil {
		return out, err
	}
	for _, p := range append(s.ws.Read(), s.analysisRead...) {
		if _, walked := st.Files[p]; walked {
			continue // as it was before it was read
		}
		if err := st.Add(p); err != nil {
			return "", err
		}
		if f := st.Files[p]; max(f.Mtime, f.Ctime) >= began {
			return out, nil
		}
	}
	if st.Changed() {
		return out, nil
	}
	st.Summary.Outputs, st.Summary.Debug = out, s.debug.String()
	return out, st.Save(file)
}
