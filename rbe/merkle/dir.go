package merkle

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// SkipDirs are the directories a staged directory leaves out: version
// control and rbs's own state and outputs.
var SkipDirs = map[string]bool{".git": true, ".rbs": true, "rbs-out": true}

// DirFiles returns the files under the directory src, hashed, as Files
// placed under dest ("" for the root), leaving out SkipDirs. A symlink to a
// regular file is taken as that file's content; a symlink to a directory
// is left out and its path returned in skipped, since following it could
// stage a tree without end.
func DirFiles(src, dest string) (files []File, skipped []string, err error) {
	err = filepath.WalkDir(src, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			if p != src && SkipDirs[de.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("input %s: %w", p, err)
		}
		if info.IsDir() {
			skipped = append(skipped, p)
			return nil
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("input %s is neither a regular file nor a directory", p)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		f, err := FileFromDisk(path.Join(dest, filepath.ToSlash(rel)), p, info.Mode()&0o111 != 0)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	return files, skipped, err
}

// PathFiles returns what the file or directory at abs stages as at p: the
// file, or the directory's files under p as DirFiles finds them.
func PathFiles(p, abs string) ([]File, error) {
	info, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		f, err := FileFromDisk(p, abs, info.Mode()&0o111 != 0)
		return []File{f}, err
	}
	fs, _, err := DirFiles(abs, p)
	return fs, err
}
