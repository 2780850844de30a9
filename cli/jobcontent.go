package cli

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rules/session"
)

// inputRoot builds the input root of a job from its --inputs values, each
// PATH (a directory staged whole, a file under its base name), a target
// label (its outputs and runfiles, built first if needed for the target
// platform, at their places under its bin directory), or DEST=either (the
// same, under the subdirectory DEST). Files are hashed here; nothing is
// sent yet. built is the platform the labels were built for, "" when none
// was given.
func (c *JobSubmitCmd) inputRoot(ctx context.Context) (_ *merkle.Tree, built string, _ error) {
	// Digests of files unchanged since the last submission (same inode,
	// size and time) carry over, so staging a tree again hashes only what
	// changed.
	if base, err := os.UserCacheDir(); err == nil {
		digests := filepath.Join(base, "rbs", "inputs-digests")
		merkle.LoadDigests(digests)
		defer func() {
			os.MkdirAll(filepath.Dir(digests), 0o755)
			merkle.SaveDigests(digests)
		}()
	}
	var files []merkle.File
	var sess *session.Session
	defer func() {
		if sess != nil {
			sess.Close()
		}
	}()
	for _, v := range c.Inputs {
		dest, src, err := parseInput(v)
		if err != nil {
			return nil, "", err
		}
		if isLabel(src) {
			if sess == nil {
				if sess, err = c.buildSession(); err != nil {
					return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
				}
				built = sess.Platform().String()
			}
			staged, err := sess.Outputs(ctx, src)
			if err != nil {
				return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
			}
			for _, st := range staged {
				fs, err := merkle.PathFiles(path.Join(dest, st.Path), st.Source)
				if err != nil {
					return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
				}
				files = append(files, fs...)
			}
			continue
		}
		info, err := os.Stat(src)
		if err != nil {
			return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
		}
		if !info.IsDir() {
			f, err := merkle.FileFromDisk(path.Join(dest, filepath.Base(src)), src, info.Mode()&0o111 != 0)
			if err != nil {
				return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
			}
			files = append(files, f)
			continue
		}
		fs, skipped, err := merkle.DirFiles(src, dest)
		if err != nil {
			return nil, "", fmt.Errorf("--inputs %q: %w", v, err)
		}
		for _, s := range skipped {
			fmt.Fprintf(os.Stderr, "rbs: --inputs %q: left out %s, a symlink to a directory\n", v, s)
		}
		files = append(files, fs...)
	}
	t, err := merkle.Build(files)
	if err != nil {
		return nil, "", fmt.Errorf("--inputs: %w", err)
	}
	return t, built, nil
}

// parseInput splits an --inputs value into where it lands in the job's
// directory ("" for the directory itself) and the local path it comes from.
func parseInput(v string) (dest, src string, err error) {
	src = v
	if d, s, ok := strings.Cut(v, "="); ok {
		if err := merkle.CheckPath(d); err != nil {
			return "", "", fmt.Errorf("--inputs %q: the destination: %v; give a path inside the job's directory", v, err)
		}
		dest, src = d, s
	}
	if src == "" {
		return "", "", fmt.Errorf("--inputs %q: no path to stage", v)
	}
	return dest, src, nil
}

// isLabel reports whether an --inputs source names a target rather than a
// path.
func isLabel(src string) bool {
	return strings.HasPrefix(src, "//") || strings.HasPrefix(src, ":") || strings.HasPrefix(src, "@")
}

// checkOutputs validates --outputs values: paths inside the job's
// directory.
func checkOutputs(values []string) error {
	for _, o := range values {
		if err := merkle.CheckPath(o); err != nil {
			return fmt.Errorf("--outputs %q: %v; give a path relative to the job's directory, inside it", o, err)
		}
	}
	return nil
}

// uploadInputs sends the blobs of the trees the cluster lacks, in one
// upload, with a bar of the bytes sent while it runs when stderr is a
// terminal, and then says on one line of stderr how many files and bytes it
// sent, how many directory nodes, and how many files (and their bytes) the
// cluster had already.
func uploadInputs(ctx context.Context, cas *client.CAS, trees []*merkle.Tree) error {
	var blobs []client.Blob
	seen := map[digest.Digest]bool{}
	dirs := map[digest.Digest]bool{}
	var files []merkle.File
	for _, t := range trees {
		files = append(files, t.Files...)
		for d := range t.Directories {
			dirs[d] = true
		}
		for _, b := range t.Blobs() {
			if !seen[b.Digest] {
				seen[b.Digest] = true
				blobs = append(blobs, b)
			}
		}
	}
	missing := map[digest.Digest]bool{}
	var bar *transferBar
	_, _, err := cas.Upload(ctx, blobs,
		client.OnMissing(func(ds []digest.Digest) {
			var total int64
			for _, d := range ds {
				missing[d] = true
				total += d.Size()
			}
			bar = startTransferBar("inputs", total)
		}),
		client.OnProgress(func(n int64) { bar.Add(n) }))
	bar.Finish(err == nil)
	if err != nil {
		return fmt.Errorf("uploading the inputs: %w", err)
	}
	fmt.Fprintln(os.Stderr, "rbs: inputs: "+uploadReport(files, dirs, missing))
	return nil
}

// uploadReport says what an upload of files (and the directory nodes dirs)
// sent, missing being the blobs the cluster lacked: "2000 files, 18.4 KiB:
// uploaded 1 file (8 B) and 3 directories; 1999 files (18.4 KiB) already on
// the cluster". Files are counted by path, a file being uploaded when its
// content was sent; the bytes uploaded are those sent, each content once,
// and the bytes already there are the sizes of the files counted there.
func uploadReport(files []merkle.File, dirs, missing map[digest.Digest]bool) string {
	var total, sentBytes, thereBytes int64
	sentFiles, sentDirs := 0, 0
	for _, f := range files {
		total += f.Digest.Size()
		if missing[f.Digest] {
			sentFiles++
		} else {
			thereBytes += f.Digest.Size()
		}
	}
	for d := range missing {
		if dirs[d] {
			sentDirs++
		} else {
			sentBytes += d.Size()
		}
	}
	return fmt.Sprintf("%s, %s: uploaded %s (%s) and %s; %s (%s) already on the cluster",
		units.Plural(len(files), "file", "files"), units.Human(total),
		units.Plural(sentFiles, "file", "files"), units.Human(sentBytes),
		units.Plural(sentDirs, "directory", "directories"),
		units.Plural(len(files)-sentFiles, "file", "files"), units.Human(thereBytes))
}
