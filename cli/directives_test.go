package cli

import (
	"io"
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
		// A script file given as the command, as to sbatch, is the script.
		{[]string{"job", "submit", "--cpus", "8", train, "a", "--b"}, []string{"job", "submit", "--name", "train model", "--cpus", "4", "--time=2h", "--env", "DATA=/data", "--cpus", "8", "--script", train, "--", "a", "--b"}},
		{[]string{"job", "submit", train, "--", "a"}, []string{"job", "submit", "--name", "train model", "--cpus", "4", "--time=2h", "--env", "DATA=/data", "--script", train, "--", "a"}},
		{[]string{"job", "submit", "--", train, "a"}, []string{"job", "submit", "--", train, "a"}},
		{[]string{"job", "submit", plain}, []string{"job", "submit", plain}},
		{[]string{"job", "submit", "--cpu", "8", train}, []string{"job", "submit", "--cpu", "8", train}},
	} {
		got, err := ExpandDirectives(tc.in, io.Discard)
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q:\n got %q, %v\nwant %q", tc.in, got, err, tc.want)
		}
	}
	// #SBATCH lines: the options rbs has become its flags; the others are
	// ignored, each named in a warning with its line.
	sbatch := script("sbatch.sh", `#!/bin/bash
#SBATCH --job-name=sim
#SBATCH -t 1:00:00
#SBATCH --array=0-9%2 --mem=4G
#SBATCH --mail-type=END --mail-user me@example.com -c2
#SBATCH -o out.%j
#SBATCH --requeue
#RBS --env A=1
#SBATCH -N 2 --no-requeue --mem 512
#SBATCHX --cpus 99
srun hostname
#SBATCH --cpus-per-task 98
`)
	var warned strings.Builder
	got, err := ExpandDirectives([]string{"job", "submit", "--script", sbatch}, &warned)
	want := []string{"job", "submit", "--name=sim", "--time=1:00:00", "--array=0-9%2", "--mem=4G", "--cpus=2", "--env", "A=1", "--nodes=2", "--no-requeue", "--mem=512", "--script", sbatch}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("#SBATCH lines:\n got %q, %v\nwant %q", got, err, want)
	}
	if want := sbatch + ":5: #SBATCH --mail-type=END --mail-user me@example.com -c2: ignored --mail-type, which rbs has no equivalent of\n" +
		sbatch + ":5: #SBATCH --mail-type=END --mail-user me@example.com -c2: ignored --mail-user, which rbs has no equivalent of\n" +
		sbatch + ":6: #SBATCH -o out.%j: ignored -o, which rbs has no equivalent of\n"; warned.String() != strings.ReplaceAll(want, sbatch, "rbs: warning: "+sbatch) {
		t.Errorf("#SBATCH warnings:\n%s", warned.String())
	}
	// --mem is sbatch's (a bare number is MiB), --memory-gb rbs's (GiB);
	// of the two, the last given wins.
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{[]string{"--mem", "4000"}, 4000 << 20},
		{[]string{"--mem=1T"}, 1 << 40},
		{[]string{"--mem", "2g"}, 2 << 30},
		{[]string{"--memory-gb", "4G"}, 4 << 30},
		{[]string{"--memory-gb", "1.5"}, 3 << 29},
		{[]string{"--memory-gb", "512MiB"}, 512 << 20},
		{[]string{"--mem", "4G", "--memory-gb", "2"}, 2 << 30},
		{[]string{"--memory-gb", "2", "--mem", "512"}, 512 << 20},
	} {
		d, err := parseSubmit(append(tc.args, "--", "true"))
		if err != nil || d.o.MemoryBytes != tc.want {
			t.Errorf("%q: %v bytes, %v; want %d", tc.args, d, err, tc.want)
		}
	}
	for _, tc := range []struct{ text, want string }{
		{"#SBATCH --time=soon\n", `bad.sh:1: #SBATCH --time=soon: --time: invalid duration "soon"`},
		{"#SBATCH --mem=4QB\n", `bad.sh:1: #SBATCH --mem=4QB: --mem: invalid size "4QB": unknown unit`},
		{"#SBATCH -J\n", "bad.sh:1: #SBATCH -J: -J needs a value"},
		{"#SBATCH --gpus=a100:2\n", `bad.sh:1: #SBATCH --gpus=a100:2: --gpus: expected a valid 32 bit int but got "a100:2"`},
		{"#SBATCH --requeue=1\n", "bad.sh:1: #SBATCH --requeue=1: --requeue takes no value"},
		{"#RBS --cpus many\n", `bad.sh:1: #RBS --cpus many: --cpus: expected a valid 32 bit int but got "many"`},
		{"#!/bin/sh\n#RBS extra\n", `bad.sh:2: #RBS extra: "extra" is not a submit flag`},
		{"#RBS --script other.sh\n", "bad.sh:1: #RBS --script other.sh: --script cannot be given"},
		{"#RBS --name 'unclosed\n", "bad.sh:1"},
		{"#RBS --time soon\n", `bad.sh:1: #RBS --time soon: --time: invalid duration "soon"`},
		{"#RBS --no-such-flag\n", "bad.sh:1: #RBS --no-such-flag: unknown flag --no-such-flag"},
		{"#!/bin/sh\n# Train.\n#RBS --cpu 4\n", `bad.sh:3: #RBS --cpu 4: unknown flag --cpu, did you mean one of "--cpus"`},
		{"#RBS -J x --tim 1h\n", `bad.sh:1: #RBS -J x --tim 1h: unknown flag --tim, did you mean one of "--mem", "--time"?`},
		{"#RBS -- true\n", `bad.sh:1: #RBS -- true: "--" is not a submit flag`},
	} {
		p := script("bad.sh", tc.text)
		_, err := ExpandDirectives([]string{"job", "submit", "--script", p}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}
