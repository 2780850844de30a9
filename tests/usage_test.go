package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors runs commands used wrongly: each prints nothing on
// stdout and one line on stderr that names what was wrong, exits 2, and
// submits nothing.
func TestUsageErrors(t *testing.T) {
	srv := startServer(t)
	bad := filepath.Join(t.TempDir(), "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\n#RBS --cpus 2\n#RBS --tim 5m\necho never\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "submit", "--cpu", "2", "--", "true"}, `unknown flag --cpu, did you mean one of "--cpus"`},
		{[]string{"job", "submit", "--parsable", "--tme", "5m", "--", "true"}, `unknown flag --tme`},
		{[]string{"job", "submit", "--script", "MISSING"}, "MISSING"},
		{[]string{"job", "submit", "--time", "-1s", "--", "true"}, `"-1s"`},
		{[]string{"job", "submit", "--time=-1s", "--", "true"}, `--time: invalid duration "-1s"`},
		{[]string{"job", "submit", "--deps", "after:1", "--", "true"}, `"after:1"`},
		{[]string{"job", "submit", "--script", bad}, "bad.sh:3: #RBS --tim 5m: unknown flag --tim"},
		{[]string{"job", "lst"}, `unexpected argument lst, did you mean "list"?`},
		{[]string{"build", "--platform", "nope", "//x"}, `--platform: platform "nope"`},
		{[]string{"job", "submit", "--platform", "linux-vax", "--", "true"}, `"linux-vax"`},
		{[]string{"job", "wait"}, `expected "<id> ..."`},
		{[]string{"job", "wait", "--timeout", "soon", "1"}, `--timeout: invalid duration "soon"`},
		{[]string{"job", "logs", "1", "--rank", "first"}, `--rank: expected a valid 32 bit int but got "first"`},
		{[]string{"build", "--jobz", "3", "//..."}, `unknown flag --jobz, did you mean "--jobs"?`},
		{[]string{"remote", "worker", "--job-slots", "many"}, `"many"`},
		{[]string{"job"}, "rbs job --help"},
		{[]string{"job", "submit", "--memory-gb", "4Q", "--", "true"}, `--memory-gb: invalid size "4Q"`},
		{[]string{"job", "submit", "--mem", "lots", "--", "true"}, `--mem: invalid size "lots"`},
		{[]string{"job", "reserve", "w", "--for", "soon"}, `--for: invalid duration "soon"`},
		{[]string{"job", "stats", "--since", "yesterday-ish"}, `--since: "yesterday-ish"`},
		{[]string{"remote", "serve", "--worker-timeout", "5x"}, `--worker-timeout: invalid duration "5x"`},
		{[]string{"remote", "serve", "--preempt-grace", "0"}, `--preempt-grace: invalid duration "0"`},
		{[]string{"remote", "worker", "--memory-gb=-1"}, `--memory-gb: invalid size "-1"`},
	} {
		cmd := exec.Command(rbsBin, tc.args...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("rbs %q: %v, want exit status 2", tc.args, err)
		}
		if len(out) != 0 {
			t.Errorf("rbs %q printed %d bytes on stdout:\n%s", tc.args, len(out), out)
		}
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "rbs: error: ") || !strings.Contains(lines[0], tc.want) {
			t.Errorf("rbs %q: stderr %q, want one line with %q", tc.args, stderr.String(), tc.want)
		}
	}
	if out := rbs(t, srv, "job", "list", "--history", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("wrong command lines submitted jobs: %s", out)
	}
}
