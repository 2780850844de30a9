package cli

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/jobs/manifest"
)

// TestSubmitParsesFlags checks that every word before the command (or
// before --) is parsed as a submit flag.
func TestSubmitParsesFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string // the job's command, when it is accepted
		cpus    int32
		wantErr string
	}{
		{args: []string{"--cpu", "4", "--", "true"}, wantErr: `unknown flag --cpu, did you mean one of "--cpus"`},
		{args: []string{"--nam", "x", "true"}, wantErr: `unknown flag --nam, did you mean one of "--name", "--mem"?`},
		{args: []string{"-c", "2", "-x", "--", "true"}, wantErr: "unknown flag -x"},
		{args: []string{"--cpus", "2", "--gpu", "1", "echo", "hi"}, wantErr: `unknown flag --gpu, did you mean`},
		{args: []string{"-", "x"}, wantErr: `command "-" starts with -: give it after --`},
		{args: []string{"--cpus"}, wantErr: "--cpus: expected int value"},
		{args: []string{"--cpus", "4", "--", "true"}, want: []string{"true"}, cpus: 4},
		{args: []string{"--cpus=4", "-J", "n", "--", "sh", "-c", "exit 3"}, want: []string{"sh", "-c", "exit 3"}, cpus: 4},
		{args: []string{"--cpus", "2", "echo", "hi"}, want: []string{"echo", "hi"}, cpus: 2},
		{args: []string{"-c", "3", "echo", "--cpu", "4"}, want: []string{"echo", "--cpu", "4"}, cpus: 3},
		{args: []string{"--", "-weird", "--cpu"}, want: []string{"-weird", "--cpu"}, cpus: 1},
		{args: []string{"--", "--", "x"}, want: []string{"--", "x"}, cpus: 1},
		{args: []string{"echo", "--", "x"}, want: []string{"echo", "--", "x"}, cpus: 1},
		{args: []string{"--script", "job_test.go", "--", "a", "--b"}, want: []string{"a", "--b"}, cpus: 1},
		{args: []string{"--script", "job_test.go"}, want: nil, cpus: 1},
	} {
		var c CLI
		k, err := kong.New(&c, append(Options(), kong.Exit(func(int) { t.Fatalf("%q: kong exited", tc.args) }))...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Parse(append([]string{"job", "submit"}, tc.args...))
		if err == nil {
			var m *manifest.Manifest
			m, err = c.Job.Submit.manifest()
			if err == nil && (strings.Join(m.Command, "|") != strings.Join(tc.want, "|") || m.CPUs != tc.cpus) {
				t.Errorf("%q: command %q, cpus %d; want %q, cpus %d", tc.args, m.Command, m.CPUs, tc.want, tc.cpus)
			}
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.wantErr)
		}
	}
}
