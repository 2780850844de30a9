package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules"
)

// Target platforms on a cluster of two: a worker of this machine's platform
// and one that says it is another (as a worker running that platform's
// programs under emulation would). A build for the other platform keeps its
// outputs apart and sends its actions to the other worker only; a job built
// for it waits, saying why, until such a worker is there, and runs on it;
// a label this machine cannot build for it, and the cluster has not built,
// is an error that says to build it for the workers' platform first.
func TestTargetPlatform(t *testing.T) {
	requireTool(t, "python3")
	other, _ := platform.Parse("linux-arm64")
	if platform.Host() == other {
		other, _ = platform.Parse("linux-x86_64")
	}
	p := other.String()
	otherBin, hostBin := filepath.FromSlash(rules.BinDir(other, "")), filepath.FromSlash(rules.BinDir(platform.Host(), ""))
	srv := startServer(t)
	startWorker(t, srv, "native")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	remote := []string{"RBS_REMOTE=" + srv.Addr}
	in := func(env []string, args ...string) string {
		t.Helper()
		out, err := run(t, ws, env, rbsBin, args...)
		if err != nil {
			t.Fatalf("rbs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(want string, env []string, args ...string) {
		t.Helper()
		out, err := run(t, ws, env, rbsBin, args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("rbs %s: %v, want an error containing %q:\n%s", strings.Join(args, " "), err, want, out)
		}
	}

	// This machine does not run the other platform's actions, and the
	// cluster has no worker of it yet.
	fails("//app:words is not built for "+p+", and this machine ("+platform.Host().String()+") cannot build it", nil, "build", "--platform", p, "//app:words")
	fails("rbs build --platform "+p+" --remote HOST:PORT //app:words", nil, "build", "--platform", p, "//app:words")
	fails("no worker offers platform property ISA="+other.ISA(), remote, "build", "--platform", p, "//app:words")

	// A job target with no action to run builds here for any platform; its
	// manifest says the platform, and the job waits for a worker of it.
	out := in([]string{"RBS_TARGET_PLATFORM=" + p, "RBS_REMOTE=" + srv.Addr}, "job", "submit", "--parsable", "//app:prepare")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	prepare := lines[len(lines)-1]
	var m struct {
		Platform string `json:"platform"`
	}
	b, err := os.ReadFile(filepath.Join(ws, otherBin, "app", "prepare.job.json"))
	if err != nil || json.Unmarshal(b, &m) != nil || m.Platform != p {
		t.Fatalf("the manifest built for %s: %v\n%s", p, err, b)
	}
	waitFor(t, srv, prepare, "pending for want of a worker of "+p, func(j jobView) bool {
		return j.State == "PENDING" && j.PendingReason == "NoWorkerOfPlatform"
	})

	startWorker(t, srv, "emulated", "--platform", p)
	j := waitFor(t, srv, prepare, "COMPLETED", inState("COMPLETED"))
	if len(j.Workers) != 1 || j.Workers[0] != "emulated" {
		t.Fatalf("the %s job ran on %v, want emulated", p, j.Workers)
	}
	if shown := rbs(t, srv, "job", "show", prepare); !strings.Contains(shown, "Platform:") || !strings.Contains(shown, p) {
		t.Fatalf("job show does not give the platform:\n%s", shown)
	}

	// On the cluster, the other platform's actions run on its worker; its
	// outputs are kept apart from this machine's.
	in(remote, "build", "--platform", p, "//app:words")
	words := filepath.Join(ws, otherBin, "app", "words.txt")
	if b, err := os.ReadFile(words); err != nil || !strings.Contains(string(b), "\n") {
		t.Fatalf("%s: %v %q", words, err, b)
	}
	if _, err := os.Stat(filepath.Join(ws, hostBin, "app", "words.txt")); !os.IsNotExist(err) {
		t.Fatalf("a build for %s wrote this machine's %s: %v", p, hostBin, err)
	}
	if link, err := os.Readlink(filepath.Join(ws, "rbs-bin")); err != nil || link != otherBin {
		t.Fatalf("rbs-bin points at %q, %v", link, err)
	}
	in(nil, "build", "//app:words")
	if _, err := os.Stat(filepath.Join(ws, hostBin, "app", "words.txt")); err != nil {
		t.Fatalf("this machine's build: %v", err)
	}
	if _, err := os.Stat(words); err != nil {
		t.Fatalf("this machine's build removed the %s outputs: %v", p, err)
	}

	// --inputs of a label stage what was built for the target platform
	// (found in the cluster's cache), and the job runs on that platform.
	env := []string{"RBS_TARGET_PLATFORM=" + p, "RBS_REMOTE=" + srv.Addr}
	out = in(env, "job", "submit", "--parsable", "--inputs", "//app:words", "--", "cat", "app/words.txt")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	cat := lines[len(lines)-1]
	j = waitFor(t, srv, cat, "COMPLETED", inState("COMPLETED"))
	if len(j.Workers) != 1 || j.Workers[0] != "emulated" {
		t.Fatalf("the job staging //app:words for %s ran on %v, want emulated", p, j.Workers)
	}
	want, _ := os.ReadFile(words)
	if logs := rbs(t, srv, "job", "logs", cat); logs != string(want) {
		t.Fatalf("the job printed %q, want %q", logs, want)
	}
	// //app:count was never built for the platform on the cluster.
	fails("//app:count is not built for "+p, env, "job", "submit", "--inputs", "//app:count", "--", "true")
	fails("Build it for the workers' platform first", env, "job", "submit", "--inputs", "//app:count", "--", "true")

	// Bad platform names are refused, naming the value.
	fails(`platform "linux-sparc"`, nil, "build", "--platform", "linux-sparc", "//app:words")
	fails(`RBS_TARGET_PLATFORM: platform "sparc"`, []string{"RBS_TARGET_PLATFORM=sparc", "RBS_REMOTE=" + srv.Addr}, "job", "submit", "//app:prepare")
	fails(`--platform: platform "vax-1"`, remote, "remote", "worker", "--platform", "vax-1")
}
