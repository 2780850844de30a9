package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobListFilters: rbs job list takes submit's -p/--partition/--queue
// and stats' --user, and shows each job's user.
func TestJobListFilters(t *testing.T) {
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("ann ann-token\nbob bob-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "cluster.rbs")
	if err := os.WriteFile(cfg, []byte("queue(name = \"batch\", default = True)\nqueue(name = \"gpu\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token", "shared-token", "--users-file", users, "--config", cfg)
	as := func(token string, args ...string) string {
		t.Helper()
		cmd := exec.Command(rbsBin, args...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rbs %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ann := strings.TrimSpace(as("ann-token", "job", "submit", "--parsable", "--name", "ann-job", "-p", "gpu", "--", "true"))
	bob := strings.TrimSpace(as("bob-token", "job", "submit", "--parsable", "--name", "bob-job", "--", "true"))
	// Rows by job id: the header names USER, each row its user.
	rows := func(args ...string) map[string][]string {
		out := as("shared-token", append([]string{"job", "list"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if f := strings.Fields(lines[0]); len(f) < 3 || f[2] != "USER" {
			t.Fatalf("list %q: header %q, want USER third", args, lines[0])
		}
		got := map[string][]string{}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			got[f[0]] = f
		}
		return got
	}
	all := rows()
	if len(all) != 2 || all[ann][2] != "ann" || all[bob][2] != "bob" {
		t.Fatalf("list: %v, want ann's and bob's jobs with their users", all)
	}
	for _, args := range [][]string{{"--user", "ann"}, {"-u", "ann"}, {"-p", "gpu"}, {"--partition", "gpu"}, {"--queue", "gpu"}} {
		if got := rows(args...); len(got) != 1 || got[ann] == nil {
			t.Errorf("list %q: %v, want ann's job alone", args, got)
		}
	}
	if got := rows("--user", "bob", "-p", "gpu"); len(got) != 0 {
		t.Errorf("list --user bob -p gpu: %v, want none", got)
	}
}
