package stamp

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestChanged: a stamp sees every change to what it walked and added, and
// none to what its walk skipped.
func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(dir string) error
		changed bool
	}{
		{"nothing", func(string) error { return nil }, false},
		{"a file rewritten, same size", func(d string) error { return os.WriteFile(filepath.Join(d, "pkg/a.txt"), []byte("AAAA"), 0o644) }, true},
		{"a file removed", func(d string) error { return os.Remove(filepath.Join(d, "pkg/a.txt")) }, true},
		{"a file added", func(d string) error { return os.WriteFile(filepath.Join(d, "pkg/new.txt"), nil, 0o644) }, true},
		{"a file renamed", func(d string) error {
			return os.Rename(filepath.Join(d, "pkg/a.txt"), filepath.Join(d, "pkg/b.txt"))
		}, true},
		{"a link retargeted", func(d string) error {
			link := filepath.Join(d, "pkg/link")
			os.Remove(link)
			return os.Symlink("other", link)
		}, true},
		{"what a link points to rewritten", func(d string) error {
			return os.WriteFile(filepath.Join(d, "pkg/target"), []byte("T2"), 0o644)
		}, true},
		{"a file added outside the walk, in an added file's directory", func(d string) error {
			return os.WriteFile(filepath.Join(d, "extra/x"), nil, 0o644)
		}, true},
		{"a skipped directory changed", func(d string) error {
			return os.WriteFile(filepath.Join(d, "skipped/x"), []byte("x"), 0o644)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"pkg", "skipped", "extra"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, content := range map[string]string{"pkg/a.txt": "aaaa", "pkg/target": "T1", "skipped/s": "s"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("target", filepath.Join(dir, "pkg/link")); err != nil {
				t.Fatal(err)
			}
			s := New()
			if err := s.Walk(dir, func(name string, isDir bool) bool { return isDir && name == "skipped" }); err != nil {
				t.Fatal(err)
			}
			if err := s.Add(filepath.Join(dir, "extra")); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "stamp")
			if err := s.Save(file); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(dir); err != nil {
				t.Fatal(err)
			}
			loaded, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := loaded.Changed(); got != tc.changed {
				t.Errorf("Changed() = %v, want %v", got, tc.changed)
			}
		})
	}
}

// TestRacyContent: a file changed just before it is recorded has what it
// held recorded too, and a change its stat cannot show (the same times and
// size, as a change within one tick of a coarse clock leaves them) is seen
// from that.
func TestRacyContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New()
	if err := s.Add(p); err != nil {
		t.Fatal(err)
	}
	st := s.Files[p]
	if st.Content == "" {
		t.Fatal("a file written just now was recorded without its content")
	}
	if s.Changed() {
		t.Fatal("Changed() = true with nothing changed")
	}
	st.Content = content(p, State{Mode: st.Mode}) + "0" // as if it had held other bytes
	s.Files[p] = st
	if !s.Changed() {
		t.Error("Changed() = false for other content under the same stat")
	}
}

// A stamp saved and loaded again is the same, and a cut or altered file
// is an error, not a stamp.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	s := New()
	s.Summary = Summary{Targets: 3, Actions: 7, Internal: 1, Outputs: "rbs-out/k8-fastbuild/bin/a\n"}
	s.Files["/w/a"] = State{Mode: 0o100644, Size: 5, Mtime: 1e18, Ctime: -3, Ino: 42}
	s.Files["/w/ab"] = State{Mode: 0o40755, Content: "d1"}
	s.Files["/w/b ->"] = State{Missing: true}
	s.Files["/x"] = State{}
	file := filepath.Join(dir, "stamp")
	if err := s.Save(file); err != nil {
		t.Fatal(err)
	}
	got, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("loaded %+v, saved %+v", got, s)
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), {9}, nil} {
		if err := New().UnmarshalBinary(bad); err == nil {
			t.Fatalf("%d bytes of %d, or altered, read as a stamp", len(bad), len(b))
		}
	}
}
