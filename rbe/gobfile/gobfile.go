// Package gobfile keeps a Go value in a file as gob: written to a
// temporary file beside it and renamed into place, so that a reader finds
// the old value or the new one, never part of one.
package gobfile

import (
	"bufio"
	"encoding/gob"
	"os"
	"path/filepath"
)

// Save writes v to file, atomically, creating file's directory if needed.
func Save(file string, v any) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+"-")
	if err != nil {
		return err
	}
	w := bufio.NewWriter(tmp)
	err = gob.NewEncoder(w).Encode(v)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Load reads into v what Save wrote to file; a missing file is
// fs.ErrNotExist.
func Load(file string, v any) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return gob.NewDecoder(bufio.NewReader(f)).Decode(v)
}
