package cli

import (
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestRunParsesFlags checks that the words after rbs run's target are its
// flags until the program's first argument or --.
func TestRunParsesFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    []string // Args, when accepted
		jobs    int
		wantErr string
	}{
		{args: []string{"//a:b", "--jbos", "2"}, wantErr: `unknown flag --jbos, did you mean "--jobs"?`},
		{args: []string{"//a:b", "--jobs", "2", "--", "--x"}, want: []string{"--", "--x"}, jobs: 2},
		{args: []string{"//a:b", "x", "--y"}, want: []string{"x", "--y"}},
		{args: []string{"--jobs", "3", "//a:b"}, jobs: 3},
	} {
		var c CLI
		k, err := kong.New(&c, append(Options(), kong.Exit(func(int) { t.Fatalf("%q: kong exited", tc.args) }))...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.Parse(append([]string{"run"}, tc.args...))
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case strings.Join(c.Run.Args, "|") != strings.Join(tc.want, "|") || c.Run.Jobs != tc.jobs:
			t.Errorf("%q: args %q, jobs %d; want %q, %d", tc.args, c.Run.Args, c.Run.Jobs, tc.want, tc.jobs)
		}
	}
}
