package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/status"
)

// scriptName is the file in a job's directory that the worker writes the
// job's script to; no input may take that name.
const scriptName = ".rbs-script"

// outputUploadTimeout bounds the upload of a job attempt's outputs, which
// goes on after the attempt was cancelled.
const outputUploadTimeout = 30 * time.Minute

// errorText is the message of err, without the gRPC code a status error
// carries.
func errorText(err error) string { return status.Convert(err).Message() }

// jobTree loads the Directory tree of digest root ("HASH/SIZE"), which
// the job's directory is staged from as an action's input root is: the
// tree is checked first, and its files are hard links into the worker's
// cache, fetched from the CAS when the cache lacks them.
func (rn *Runner) jobTree(ctx context.Context, root string) (*execroot.Tree, error) {
	d, err := digest.Parse(root)
	if err != nil {
		return nil, err
	}
	t, err := rn.cfg.Cache.LoadTree(ctx, rn.source(), d)
	if err != nil {
		return nil, err
	}
	if holds(t.Dirs[t.Root], scriptName) {
		return nil, fmt.Errorf("the input root holds %q, the name of the file the worker writes the job's script to", scriptName)
	}
	return t, nil
}

// withUpstream returns the job's input tree (nil for none) with the
// outputs of the jobs it runs after merged in, at their paths. A path two
// of them hold differently fails the job, naming both.
func (rn *Runner) withUpstream(ctx context.Context, tree *execroot.Tree, up []*workerpb.UpstreamOutput) (*execroot.Tree, error) {
	from := "the job's inputs"
	for _, u := range up {
		t, err := rn.jobTree(ctx, u.OutputRoot)
		if err != nil {
			return nil, fmt.Errorf("staging the outputs of job %s, which this job runs after: %s", u.JobId, errorText(err))
		}
		if tree == nil {
			tree, from = t, "the outputs of job "+u.JobId
			continue
		}
		var conflict *execroot.ConflictError
		merged, err := execroot.Merge(tree, t)
		if errors.As(err, &conflict) {
			return nil, fmt.Errorf("staging the outputs of job %s, which this job runs after: %s holds %s too, with other contents", u.JobId, from, conflict.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("staging the outputs of job %s, which this job runs after: %v", u.JobId, err)
		}
		tree = merged
		if from == "the job's inputs" {
			from = "the job's inputs or the outputs of job " + u.JobId
		} else {
			from += " or " + u.JobId
		}
	}
	return tree, nil
}

// holds reports whether dir has an entry called name.
func holds(dir *repb.Directory, name string) bool {
	for _, f := range dir.Files {
		if f.Name == name {
			return true
		}
	}
	for _, d := range dir.Directories {
		if d.Name == name {
			return true
		}
	}
	for _, l := range dir.Symlinks {
		if l.Name == name {
			return true
		}
	}
	return false
}

// jobRecord gathers the outputs, or the checkpoint, of a job attempt found
// in its directory, where no symlink is followed, on the way to an output
// or under it.
type jobRecord struct {
	root *execroot.Root
	// kind, "output" or "checkpoint", starts the notes.
	kind  string
	files []merkle.File
	links []merkle.Symlink
	dirs  []string
	outs  []*workerpb.JobOutput
	// notes say which outputs were not recorded, and why.
	notes []string
}

func newJobRecord(dir, kind string) (*jobRecord, error) {
	root, err := execroot.NewRoot(dir, execroot.NoLinks)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", kind, err)
	}
	return &jobRecord{root: root, kind: kind}, nil
}

// note adds a note; format follows the record's kind.
func (r *jobRecord) note(format string, args ...any) {
	r.notes = append(r.notes, r.kind+fmt.Sprintf(format, args...))
}

// collect returns the output at the path p, relative to the job's
// directory, or nil with a note when it is missing or cannot be recorded.
func (r *jobRecord) collect(p string) *execroot.Output {
	if err := merkle.CheckPath(p); err != nil {
		r.note(": %v", err)
		return nil
	}
	o, err := r.root.Collect(p)
	if err != nil {
		r.note(" %s: %s", p, errorText(err))
		return nil
	}
	if o.Kind == execroot.Dir {
		for _, s := range o.Contents.Skipped {
			r.note(" %s: %s; left out", p, s)
		}
	}
	return o
}

// add records o at the path at of the tree to upload, and lists it as the
// output p; a directory at "" is the tree's root.
func (r *jobRecord) add(p, at string, o *execroot.Output) {
	switch o.Kind {
	case execroot.Symlink:
		r.links = append(r.links, merkle.Symlink{Path: at, Target: o.Target})
	case execroot.File:
		r.files = append(r.files, merkle.File{Path: at, Digest: o.Digest, Executable: o.Executable, Source: o.Abs})
	case execroot.Dir:
		if at != "" {
			r.dirs = append(r.dirs, at)
		}
		for _, f := range o.Contents.Files {
			f.Path = path.Join(at, f.Path)
			r.files = append(r.files, f)
		}
		for _, l := range o.Contents.Links {
			l.Path = path.Join(at, l.Path)
			r.links = append(r.links, l)
		}
		for _, d := range o.Contents.Dirs {
			r.dirs = append(r.dirs, path.Join(at, d))
		}
	}
	r.outs = append(r.outs, &workerpb.JobOutput{Path: p, Kind: o.Kind.String(), SizeBytes: o.Size})
}

// recordOutputs records the outputs at paths in the job's directory dir
// into the CAS, and fills end's output root and list with those found.
// It returns notes on what was not recorded. The payload must be gone and,
// under --run-as, the directory reclaimed: nothing may change the tree
// while it is read.
func (rn *Runner) recordOutputs(ctx context.Context, dir string, paths []string, end *workerpb.JobEnded) []string {
	if len(paths) == 0 {
		return nil
	}
	r, err := newJobRecord(dir, "output")
	if err != nil {
		return []string{err.Error()}
	}
	for _, p := range paths {
		if o := r.collect(p); o != nil {
			r.add(p, p, o)
		}
	}
	if len(r.outs) == 0 {
		return r.notes
	}
	root, err := rn.upload(ctx, r, "outputs")
	if err != nil {
		return append(r.notes, err.Error())
	}
	end.OutputRoot, end.Outputs = root.String(), r.outs
	return r.notes
}

// upload builds the tree of what r gathered, what it names, and uploads it
// into the CAS, going on after ctx was cancelled (the attempt's end).
func (rn *Runner) upload(ctx context.Context, r *jobRecord, what string) (digest.Digest, error) {
	tree, err := merkle.BuildAll(r.files, r.links, r.dirs)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("recording the %s: %v", what, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outputUploadTimeout)
	defer cancel()
	if _, _, err := rn.cfg.CAS.Upload(ctx, tree.Blobs()); err != nil {
		return digest.Digest{}, fmt.Errorf("uploading the %s: %s", what, errorText(err))
	}
	return tree.Root, nil
}

// restoreCheckpoint stages the Directory of digest root ("HASH/SIZE"), a
// checkpoint an earlier attempt recorded, into the directory ckpt of the
// job's directory dir, after its inputs. It is staged as inputs are, but
// its files are copies, writable by the job, rather than hard links into
// the worker's cache: a job rewrites its checkpoint, most often in place,
// and a write through a link would change the cached blob (and have the
// blob dropped as changed when the attempt ends). No directory on the way
// to ckpt may be a symlink or a file among the inputs.
func (rn *Runner) restoreCheckpoint(ctx context.Context, root, dir, ckpt string) error {
	d, err := digest.Parse(root)
	if err != nil {
		return err
	}
	if err := merkle.CheckPath(ckpt); err != nil {
		return err
	}
	r, err := execroot.NewRoot(dir, execroot.NoLinks)
	if err != nil {
		return err
	}
	var blocked *execroot.BlockedError
	switch _, info, err := r.Lookup(ckpt); {
	case errors.As(err, &blocked):
		return fmt.Errorf("%s is not a directory among the job's inputs", blocked.At)
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory among the job's inputs", ckpt)
	}
	t, err := rn.cfg.Cache.LoadTree(ctx, rn.source(), d)
	if err != nil {
		return err
	}
	return rn.cfg.Cache.StageCopies(ctx, rn.source(), t, filepath.Join(dir, filepath.FromSlash(ckpt)))
}

// recordCheckpoint records the directory ckpt of the job's directory dir
// into the CAS, when the attempt left one, and sets end's checkpoint root
// to the digest of its Directory. It returns notes on what was not
// recorded.
func (rn *Runner) recordCheckpoint(ctx context.Context, dir, ckpt string, end *workerpb.JobEnded) []string {
	r, err := newJobRecord(dir, "checkpoint")
	if err != nil {
		return []string{err.Error()}
	}
	if _, _, err := r.root.Lookup(ckpt); errors.Is(err, fs.ErrNotExist) {
		return nil // none written yet
	}
	o := r.collect(ckpt)
	if o == nil {
		return r.notes
	}
	if o.Kind != execroot.Dir {
		return append(r.notes, fmt.Sprintf("checkpoint %s: a %s, not a directory; not recorded", ckpt, o.Kind))
	}
	// The tree is the directory's.
	r.add(ckpt, "", o)
	root, err := rn.upload(ctx, r, "checkpoint")
	if err != nil {
		return append(r.notes, err.Error())
	}
	end.CheckpointRoot = root.String()
	return r.notes
}
