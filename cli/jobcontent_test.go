package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInputsAndOutputsValues(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src", "pkg", ".git"), 0o755)
	os.MkdirAll(filepath.Join(dir, "src", "rbs-out"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "pkg", "a.py"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "pkg", ".git", "HEAD"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "rbs-out", "out"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	src, file := filepath.Join(dir, "src"), filepath.Join(dir, "run.sh")
	for _, tc := range []struct {
		inputs []string
		files  []string // the staged paths, "+x" marking executables
		err    string
	}{
		{inputs: []string{src}, files: []string{"pkg/a.py"}},
		{inputs: []string{file}, files: []string{"run.sh+x"}},
		{inputs: []string{"code=" + src, "bin/tools=" + file}, files: []string{"bin/tools/run.sh+x", "code/pkg/a.py"}},
		{inputs: []string{"/abs=" + src}, err: `--inputs "/abs=`},
		{inputs: []string{"../up=" + src}, err: `contains ".."`},
		{inputs: []string{"a=" + filepath.Join(dir, "missing")}, err: "no such file"},
		{inputs: []string{"x="}, err: "no path to stage"},
		{inputs: []string{"//nowhere:train"}, err: `--inputs "//nowhere:train": no such package`},
		{inputs: []string{src, "pkg/a.py=" + file}, err: "both a file and the directory"},
	} {
		c := &JobSubmitCmd{Inputs: tc.inputs}
		tree, built, err := c.inputRoot(t.Context())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error containing %q", tc.inputs, err, tc.err)
			}
			continue
		}
		if err != nil || built != "" {
			t.Errorf("%q: %v, built for %q; want no error and no platform without a label", tc.inputs, err, built)
			continue
		}
		var got []string
		for _, f := range tree.Files {
			p := f.Path
			if f.Executable {
				p += "+x"
			}
			got = append(got, p)
		}
		if strings.Join(got, " ") != strings.Join(tc.files, " ") {
			t.Errorf("%q staged %q, want %q", tc.inputs, got, tc.files)
		}
	}
	for _, tc := range []struct {
		outputs []string
		err     string
	}{
		{[]string{"out", "ckpt/model.pt"}, ""},
		{[]string{"/etc/passwd"}, `--outputs "/etc/passwd"`},
		{[]string{"../x"}, `contains ".."`},
		{[]string{"a/../../x"}, `--outputs "a/../../x"`},
		{[]string{""}, "empty path"},
	} {
		err := checkOutputs(tc.outputs)
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("checkOutputs(%q) = %v, want %q", tc.outputs, err, tc.err)
		}
	}
}
