package gobfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSaveLoad: what Save writes Load reads back, into a directory Save
// made; a second Save replaces the first and leaves no temporary file; a
// missing file is fs.ErrNotExist, and a file that is not gob an error.
func TestSaveLoad(t *testing.T) {
	type value struct {
		Names []string
		N     int
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "sub", "v")
	for _, want := range []value{{Names: []string{"a", "b"}, N: 1}, {N: 2}} {
		if err := Save(file, want); err != nil {
			t.Fatal(err)
		}
		var got value
		if err := Load(file, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Load = %+v, %v; want %+v", got, err, want)
		}
	}
	if entries, err := os.ReadDir(filepath.Dir(file)); err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %v (%v), want the file alone", entries, err)
	}
	var v value
	if err := Load(filepath.Join(dir, "missing"), &v); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not gob"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Load(bad, &v); err == nil {
		t.Error("Load of a file that is not gob succeeded")
	}
}
