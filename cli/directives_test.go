package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExpandDirectives(t *testing.T) {
	dir := t.TempDir()
	script := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := script("train.sh", `#!/bin/bash
# Train a model.
#RBS --name "train model" --cpus 4
#RBSX --cpus 99
# RBS --cpus 98

#RBS --time=2h --env DATA=/data
python3 train.py
#RBS --cpus 97
`)
	plain := script("plain.sh", "echo hi\n#RBS --cpus 2\n")
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"job", "submit", "--script", train}, []string{"job", "submit", "--name", "train model", "--cpus", "4", "--time=2h", "--env", "DATA=/data", "--script", train}},
		{[]string{"job", "submit", "--cpus", "8", "--script=" + train, "--", "a"}, []string{"job", "submit", "--name", "train model", "--cpus", "4", "--time=2h", "--env", "DATA=/data", "--cpus", "8", "--script=" + train, "--", "a"}},
		{[]string{"job", "submit", "--script", plain}, []string{"job", "submit", "--script", plain}},
		{[]string{"job", "submit", "--", "sh", "--script", train}, []string{"job", "submit", "--", "sh", "--script", train}},
		{[]string{"job", "list"}, []string{"job", "list"}},
		{[]string{"build", "--script", train}, []string{"build", "--script", train}},
		{[]string{"job", "submit", "--script", filepath.Join(dir, "missing.sh")}, []string{"job", "submit", "--script", filepath.Join(dir, "missing.sh")}},
	} {
		got, err := ExpandDirectives(tc.in)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q:\n got %q, %v\nwant %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"#RBS --cpus many\n", `bad.sh:1: #RBS --cpus many: --cpus: expected a valid 32 bit int but got "many"`},
		{"#!/bin/sh\n#RBS extra\n", `bad.sh:2: #RBS extra: "extra" is not a submit flag`},
		{"#RBS --script other.sh\n", "bad.sh:1: #RBS --script other.sh: --script cannot be given"},
		{"#RBS --name 'unclosed\n", "bad.sh:1"},
		{"#RBS --time soon\n", `bad.sh:1: #RBS --time soon: invalid time limit "soon"`},
		{"#RBS --no-such-flag\n", "bad.sh:1: #RBS --no-such-flag: unknown flag --no-such-flag"},
		{"#!/bin/sh\n# Train.\n#RBS --cpu 4\n", `bad.sh:3: #RBS --cpu 4: unknown flag --cpu, did you mean one of "--cpus"`},
		{"#RBS -J x --tim 1h\n", `bad.sh:1: #RBS -J x --tim 1h: unknown flag --tim, did you mean "--time"?`},
		{"#RBS -- true\n", `bad.sh:1: #RBS -- true: "--" is not a submit flag`},
	} {
		p := script("bad.sh", tc.text)
		_, err := ExpandDirectives([]string{"job", "submit", "--script", p})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}
