package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
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

// stageJobInputs stages the Directory tree of digest root ("HASH/SIZE")
// into the job's directory dir, as an action's input root is staged: the
// tree is checked first, and its files are hard links into the worker's
// cache, fetched from the CAS when the cache lacks them.
func (w *Worker) stageJobInputs(ctx context.Context, root, dir string) (*inputTree, error) {
	d, err := digest.Parse(root)
	if err != nil {
		return nil, err
	}
	t, err := w.runner.cache.loadTree(ctx, d)
	if err != nil {
		return nil, err
	}
	if holds(t.dirs[t.root], scriptName) {
		return nil, fmt.Errorf("the input root holds %q, the name of the file the worker writes the job's script to", scriptName)
	}
	if err := w.runner.cache.stage(ctx, t, dir); err != nil {
		return nil, err
	}
	return t, nil
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

// changedInputNote says which input file of t, if any, the job changed in
// place; changed drops such blobs from the cache.
func (w *Worker) changedInputNote(t *inputTree) string {
	changed, err := w.runner.cache.changed(t)
	switch {
	case err != nil:
		return "checking the job's inputs for changes: " + err.Error()
	case changed != "":
		return fmt.Sprintf("input %s was written to in place while the job ran; inputs are hard links into the worker's cache, so it was dropped from the cache (copy an input before changing it)", changed)
	}
	return ""
}

// jobRecord gathers the outputs, or the checkpoint, of a job attempt found
// in its directory.
type jobRecord struct {
	dir string
	// kind, "output" or "checkpoint", starts the notes.
	kind  string
	files []merkle.File
	links []merkle.Symlink
	dirs  []string
	outs  []*workerpb.JobOutput
	// notes say which outputs were not recorded, and why.
	notes []string
}

// note adds a note; format follows the record's kind.
func (r *jobRecord) note(format string, args ...any) {
	r.notes = append(r.notes, r.kind+fmt.Sprintf(format, args...))
}

// add records the output at the path p, relative to the job's directory,
// unless it is missing or is reached through a symlink: no symlink is ever
// followed, on the way to p or under it.
func (r *jobRecord) add(p string) {
	if err := merkle.CheckPath(p); err != nil {
		r.note(": %v", err)
		return
	}
	abs := r.dir
	parts := strings.Split(p, "/")
	for i, name := range parts {
		abs = filepath.Join(abs, name)
		info, err := os.Lstat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.note(" %s: not found", p)
			return
		case err != nil:
			r.note(" %s: %v", p, err)
			return
		case i == len(parts)-1:
			r.addEntry(p, abs, info)
		case info.Mode()&fs.ModeSymlink != 0:
			r.note(" %s: %s is a symlink, which outputs are not recorded through", p, path.Join(parts[:i+1]...))
			return
		case !info.IsDir():
			r.note(" %s: not found (%s is not a directory)", p, path.Join(parts[:i+1]...))
			return
		}
	}
}

// addEntry records the entry at abs, found at p, as an output.
func (r *jobRecord) addEntry(p, abs string, info fs.FileInfo) {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		if err := r.addLink(p, abs); err != nil {
			r.note(" %s: %v", p, err)
			return
		}
		r.outs = append(r.outs, &workerpb.JobOutput{Path: p, Kind: "symlink"})
	case info.Mode().IsRegular():
		size, err := r.addFile(p, abs, info)
		if err != nil {
			r.note(" %s: %v", p, err)
			return
		}
		r.outs = append(r.outs, &workerpb.JobOutput{Path: p, Kind: "file", SizeBytes: size})
	case info.IsDir():
		files, links, dirs := len(r.files), len(r.links), len(r.dirs)
		size, err := r.addDir(p, abs)
		if err != nil {
			// None of it is recorded.
			r.files, r.links, r.dirs = r.files[:files], r.links[:links], r.dirs[:dirs]
			r.note(" %s: %v", p, err)
			return
		}
		r.outs = append(r.outs, &workerpb.JobOutput{Path: p, Kind: "directory", SizeBytes: size})
	default:
		r.note(" %s: neither a file, a directory nor a symlink (%s)", p, info.Mode().Type())
	}
}

func (r *jobRecord) addLink(p, abs string) error {
	target, err := os.Readlink(abs)
	if err != nil {
		return err
	}
	r.links = append(r.links, merkle.Symlink{Path: p, Target: target})
	return nil
}

func (r *jobRecord) addFile(p, abs string, info fs.FileInfo) (int64, error) {
	d, err := merkle.HashFile(abs)
	if err != nil {
		return 0, err
	}
	r.files = append(r.files, merkle.File{Path: p, Digest: d, Executable: info.Mode()&0o111 != 0, Source: abs})
	return d.Size(), nil
}

// addDir records the directory at abs, found at p, and everything under
// it, and returns the total size of its files. Its entries that are
// neither files, directories nor symlinks are left out with a note.
func (r *jobRecord) addDir(p, abs string) (int64, error) {
	var total int64
	r.dirs = append(r.dirs, p)
	err := filepath.WalkDir(abs, func(sub string, e fs.DirEntry, err error) error {
		if err != nil || sub == abs {
			return err
		}
		rel, err := filepath.Rel(abs, sub)
		if err != nil {
			return err
		}
		at := path.Join(p, filepath.ToSlash(rel))
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			return r.addLink(at, sub)
		case e.IsDir():
			r.dirs = append(r.dirs, at)
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return err
			}
			size, err := r.addFile(at, sub, info)
			total += size
			return err
		default:
			r.note(" %s: %s is neither a file, a directory nor a symlink (%s); left out", p, at, e.Type())
		}
		return nil
	})
	return total, err
}

// recordOutputs records the outputs at paths in the job's directory dir
// into the CAS, and fills end's output root and list with those found.
// It returns notes on what was not recorded. The payload must be gone and,
// under --run-as, the directory reclaimed: nothing may change the tree
// while it is read.
func (w *Worker) recordOutputs(ctx context.Context, dir string, paths []string, end *workerpb.JobEnded) []string {
	r := &jobRecord{dir: dir, kind: "output"}
	for _, p := range paths {
		r.add(p)
	}
	if len(r.outs) == 0 {
		return r.notes
	}
	root, err := w.upload(ctx, r, "outputs")
	if err != nil {
		return append(r.notes, err.Error())
	}
	end.OutputRoot, end.Outputs = root.String(), r.outs
	return r.notes
}

// upload builds the tree of what r gathered, what it names, and uploads it
// into the CAS, going on after ctx was cancelled (the attempt's end).
func (w *Worker) upload(ctx context.Context, r *jobRecord, what string) (digest.Digest, error) {
	tree, err := merkle.BuildAll(r.files, r.links, r.dirs)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("recording the %s: %v", what, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outputUploadTimeout)
	defer cancel()
	if _, _, err := w.runner.cas.Upload(ctx, tree.Blobs()); err != nil {
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
func (w *Worker) restoreCheckpoint(ctx context.Context, root, dir, ckpt string) error {
	d, err := digest.Parse(root)
	if err != nil {
		return err
	}
	if err := merkle.CheckPath(ckpt); err != nil {
		return err
	}
	abs := dir
	for _, name := range strings.Split(ckpt, "/") {
		abs = filepath.Join(abs, name)
		info, err := os.Lstat(abs)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if !info.IsDir() {
			return fmt.Errorf("%s is not a directory among the job's inputs", strings.TrimPrefix(abs, dir+"/"))
		}
	}
	t, err := w.runner.cache.loadTree(ctx, d)
	if err != nil {
		return err
	}
	t.copies = true
	return w.runner.cache.stage(ctx, t, filepath.Join(dir, filepath.FromSlash(ckpt)))
}

// recordCheckpoint records the directory ckpt of the job's directory dir
// into the CAS, when the attempt left one, and sets end's checkpoint root
// to the digest of its Directory. It returns notes on what was not
// recorded.
func (w *Worker) recordCheckpoint(ctx context.Context, dir, ckpt string, end *workerpb.JobEnded) []string {
	r := &jobRecord{dir: dir, kind: "checkpoint"}
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(ckpt))); errors.Is(err, fs.ErrNotExist) {
		return nil // none written yet
	}
	r.add(ckpt)
	if len(r.outs) == 0 {
		return r.notes
	}
	if r.outs[0].Kind != "directory" {
		return append(r.notes, fmt.Sprintf("checkpoint %s: a %s, not a directory; not recorded", ckpt, r.outs[0].Kind))
	}
	// The tree is the directory's: its paths are taken relative to it.
	for i := range r.files {
		r.files[i].Path = strings.TrimPrefix(r.files[i].Path, ckpt+"/")
	}
	for i := range r.links {
		r.links[i].Path = strings.TrimPrefix(r.links[i].Path, ckpt+"/")
	}
	dirs := r.dirs[:0]
	for _, p := range r.dirs[1:] { // the first is ckpt itself
		dirs = append(dirs, strings.TrimPrefix(p, ckpt+"/"))
	}
	r.dirs = dirs
	root, err := w.upload(ctx, r, "checkpoint")
	if err != nil {
		return append(r.notes, err.Error())
	}
	end.CheckpointRoot = root.String()
	return r.notes
}
