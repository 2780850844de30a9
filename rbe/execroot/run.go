package execroot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/process"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Spec is a command to run in a fresh exec root: the build tool's local
// actions, a worker's REAPI actions and batch jobs run through Run alike.
type Spec struct {
	// Source is where the blobs of Tree the cache lacks come from.
	Source Source
	// Tree is the input root to lay out in Root; nil for none.
	Tree *Tree
	// Root is the exec root, made as needed.
	Root string
	// WorkingDir is where the command runs and outputs are found,
	// relative to Root.
	WorkingDir string
	Outputs    []Declared
	// Strict collects outputs only after a command that exited 0, and
	// then each must be there as it was declared: a file, or a directory.
	// Otherwise they are collected after any command that did not time
	// out, and those absent are left out, as REAPI allows.
	Strict bool
	// Before, when set, gets Root once the inputs are laid out, before
	// the command runs (to give it to the user the command runs as);
	// After gets it once the command has ended, before the inputs are
	// checked (to take it back). An error from either ends Run with it.
	Before, After func(root string) error
	// Process is the command; its Dir is set to the working directory.
	Process process.Spec
	// Exec runs it: process.Run when nil.
	Exec func(context.Context, process.Spec) (process.Result, error)
}

// StageError is Run's error when the inputs could not be laid out.
type StageError struct{ Err error }

func (e *StageError) Error() string { return "staging its inputs: " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// Outcome is how a command run by Run ended.
type Outcome struct {
	Process process.Result
	// StartErr says the command could not be started.
	StartErr error
	// Changed names an input the command wrote to in place, if any (see
	// Staged.Changed), and Unchecked is why the inputs could not be
	// checked: with either, no output is collected.
	Changed   string
	Unchecked error
	// Outputs are the outputs collected into an ActionResult whose exit
	// code is the command's; nil when none were collected.
	Outputs *Result
}

// Run lays s.Tree out in s.Root with the cache's hard links, makes the
// parent directories of the declared outputs, runs the command, checks
// that it changed no input, and collects its outputs. Its error is for
// what kept the command from being tried, or its outputs from being read;
// how the command ended is in the Outcome.
func (c *Cache) Run(ctx context.Context, s Spec) (*Outcome, error) {
	var staged *Staged
	if s.Tree != nil {
		var err error
		if staged, err = c.Stage(ctx, s.Source, s.Tree, s.Root); err != nil {
			return nil, &StageError{err}
		}
	}
	wd := filepath.Join(s.Root, filepath.FromSlash(s.WorkingDir))
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, err
	}
	for _, o := range s.Outputs {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(wd, filepath.FromSlash(o.Path))), 0o755); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "creating the directory of output %q: %v", o.Path, err)
		}
	}
	if s.Before != nil {
		if err := s.Before(s.Root); err != nil {
			return nil, err
		}
	}
	ps, exec := s.Process, s.Exec
	ps.Dir = wd
	if exec == nil {
		exec = process.Run
	}
	out := &Outcome{}
	out.Process, out.StartErr = exec(ctx, ps)
	if s.After != nil {
		if err := s.After(s.Root); err != nil {
			return nil, err
		}
	}
	if staged != nil {
		out.Changed, out.Unchecked = staged.Changed()
	}
	pr := out.Process
	if out.StartErr != nil || out.Changed != "" || out.Unchecked != nil || pr.Cancelled || pr.TimedOut || s.Strict && pr.ExitCode != 0 {
		return out, nil
	}
	out.Outputs = NewResult(&repb.ActionResult{ExitCode: int32(pr.ExitCode)})
	collect := collectLenient
	if s.Strict {
		collect = collectStrict
	}
	if err := collect(out.Outputs, s.Root, s.WorkingDir, s.Outputs); err != nil {
		return nil, err
	}
	return out, nil
}

// collectLenient adds the declared outputs found to r, leaving out those
// absent. An output path may lead through symlinks only to directories
// inside root.
func collectLenient(r *Result, root, wd string, outs []Declared) error {
	rt, err := NewRoot(root, LinksInside)
	if err != nil {
		return err
	}
	for _, o := range outs {
		found, err := rt.Collect(path.Join(wd, o.Path))
		if err == nil {
			err = r.Add(o, found)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			st := status.Convert(err)
			return status.Errorf(st.Code(), "output %s: %s", o.Path, st.Message())
		}
	}
	return nil
}

// collectStrict adds every declared output to r, each of the kind it was
// declared: a missing one, or one of another kind, is an error naming it.
// A symlink declared as an output counts as what it points to.
func collectStrict(r *Result, root, wd string, outs []Declared) error {
	rt, err := NewRoot(root, LinksInside)
	if err != nil {
		return err
	}
	for _, o := range outs {
		what := map[Kind]string{File: "output", Dir: "output directory", Any: "output"}[o.Kind]
		abs, info, err := rt.Lookup(path.Join(wd, o.Path))
		if err == nil && info.Mode()&fs.ModeSymlink != 0 {
			info, err = os.Stat(abs)
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("it did not create its declared %s %q", what, o.Path)
		case err != nil:
			return fmt.Errorf("output %q: %s", o.Path, status.Convert(err).Message())
		case o.Kind == Dir && !info.IsDir():
			return fmt.Errorf("declared output directory %q is not a directory", o.Path)
		case o.Kind == File && info.IsDir():
			return fmt.Errorf("declared output file %q is a directory", o.Path)
		case o.Kind == File && !info.Mode().IsRegular():
			return fmt.Errorf("declared output %q is not a regular file", o.Path)
		}
		found, err := Record(o.Path, abs, info)
		if err == nil {
			err = r.Add(o, found)
		}
		if err != nil {
			return fmt.Errorf("%s %q: %s", what, o.Path, status.Convert(err).Message())
		}
	}
	return nil
}
