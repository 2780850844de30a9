package tests

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunAs runs a job and a build action on a root worker started with
// --run-as nobody: both run as nobody, can write where they should (the
// job its directory, the action its declared outputs, in a directory the
// worker made), and can read neither the worker's token file (0600, root's),
// nor its environment, nor its cache, nor the copy it keeps of the job's
// output; what they leave behind, however locked, is cleaned up.
func TestRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("--run-as needs a root worker (RBS_TEST_REQUIRE_ALL=1)")
		}
		t.Skip("--run-as needs a root worker; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
	}
	requireMemoryCgroup(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	// The test's temporary directories are closed to other users: they are
	// opened to passing, so that only the modes rbs sets keep nobody out.
	if err := os.Chmod(filepath.Dir(t.TempDir()), 0o711); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token", "s3cret")
	if err := os.Chmod(srv.DataDir, 0o711); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(srv.DataDir, "worker-token")
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the worker token file: %v, %v; want mode 0600, root's", fi, err)
	}
	w := startWorker(t, srv, "w1", "--run-as", "nobody")
	cache := filepath.Join(w.WorkDir, "cache")

	// The job is a script, which the worker writes into the job's
	// directory. The worker moves the job into its memory group once it
	// has started: the job waits for that first.
	script := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte(`until grep -q rbs-job- /proc/self/cgroup; do sleep 0.01; done
id -u
echo "home=$HOME user=$USER"
cat "$1"
cat /proc/$PPID/environ >/dev/null
[ -x "$2" ] && echo cache open || echo cache closed
cat "${PWD%/*}/$RBS_JOB_ID-$RBS_ATTEMPT.out" >/dev/null
mkdir -p locked/in && touch locked/in/f && chmod 0 locked/in locked && echo wrote its directory
`), 0o644); err != nil {
		t.Fatal(err)
	}
	id := submit(t, srv, "--time", "1m", "--script", script, "--", tokenFile, cache)
	rbs(t, srv, "job", "wait", id)
	out := rbs(t, srv, "job", "logs", id)
	if strings.Contains(out, token) {
		t.Fatalf("the job read the worker token:\n%s", out)
	}
	first, _, _ := strings.Cut(out, "\n")
	for _, want := range []string{
		"home=" + nobody.HomeDir + " user=nobody",
		tokenFile + ": Permission denied",
		fmt.Sprintf("/proc/%d/environ: Permission denied", w.cmd.Process.Pid),
		"cache closed",
		".out: Permission denied",
		"wrote its directory",
	} {
		if first != nobody.Uid || !strings.Contains(out, want) {
			t.Fatalf("the job's output lacks uid %s on its first line or %q:\n%s", nobody.Uid, want, out)
		}
	}
	if j := show(t, srv, id); j.State != "COMPLETED" {
		t.Fatalf("job %s: %+v, want COMPLETED", id, j)
	}
	// The job's directory is gone, locked subdirectories and all.
	entries, err := os.ReadDir(filepath.Join(w.WorkDir, "jobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("the job left its directory %s behind", e.Name())
		}
	}

	// An action writes its declared output in a directory the worker
	// created for it.
	userToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(userToken, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	ws.write("who/BUILD.rbs", fmt.Sprintf(`genrule(name = "who", outs = ["sub/who.txt"], cmd = "{ id -u; cat '%s' 2>&1; [ -x '%s' ] && echo cache open || echo cache closed; } > $@")`+"\n", tokenFile, cache))
	ws.mustRbs("build", "--remote", srv.Addr, "--token-file", userToken, "//who")
	got := ws.read("rbs-bin/who/sub/who.txt")
	if first, _, _ := strings.Cut(got, "\n"); first != nobody.Uid || strings.Contains(got, token) ||
		!strings.Contains(got, tokenFile+": Permission denied") || !strings.Contains(got, "cache closed") {
		t.Fatalf("the action wrote %q; want uid %s, the token file and the cache closed to it", got, nobody.Uid)
	}
	if entries, err := os.ReadDir(filepath.Join(w.WorkDir, "exec")); err != nil || len(entries) != 0 {
		t.Fatalf("the action left %v behind in exec (%v)", entries, err)
	}
}
