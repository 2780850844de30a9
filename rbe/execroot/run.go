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
// actions and a worker's REAPI actions run through Run alike.
type Spec struct {
	// Source is where the blobs of Tree the cache lacks come from.
	Source Source
	Tree   *Tree
	// Root is the exec root to lay Tree out in, made as needed.
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
	// HandOver, when set, gets Root once it is laid out, before the
	// command runs (to give it to the user the command runs as); Reclaim
	// gets it back after.
	HandOver, Reclaim func(root string) error
	// Process is the command; its Dir is set to the working directory.
	Process process.Spec
}

// Outcome is how a command run by Run ended.
type Outcome struct {
	Process process.Result
	// StartErr says the command could not be started.
	StartErr error
	// Changed names an input the command wrote to in place, if any (see
	// Staged.Changed): nothing else is worked out then.
	Changed string
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
	staged, err := c.Stage(ctx, s.Source, s.Tree, s.Root)
	if err != nil {
		return nil, fmt.Errorf("staging its inputs: %w", err)
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
	if s.HandOver != nil {
		if err := s.HandOver(s.Root); err != nil {
			return nil, err
		}
	}
	ps := s.Process
	ps.Dir = wd
	out := &Outcome{}
	out.Process, out.StartErr = process.Run(ctx, ps)
	if s.Reclaim != nil {
		if err := s.Reclaim(s.Root); err != nil {
			return nil, err
		}
	}
	if out.Changed, err = staged.Changed(); err != nil {
		return nil, fmt.Errorf("checking its inputs: %w", err)
	}
	pr := out.Process
	if out.StartErr != nil || out.Changed != "" || pr.Cancelled || pr.TimedOut || s.Strict && pr.ExitCode != 0 {
		return out, nil
	}
	out.Outputs = NewResult(&repb.ActionResult{ExitCode: int32(pr.ExitCode)})
	if s.Strict {
		err = collectStrict(out.Outputs, s.Root, s.WorkingDir, s.Outputs)
	} else {
		err = collectLenient(out.Outputs, s.Root, s.WorkingDir, s.Outputs)
	}
	if err != nil {
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
