package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// A second rbs remote serve on a data directory in use refuses to start and
// names the server that holds it; one on a non-loopback address without a
// token refuses too.
func TestServeRefuses(t *testing.T) {
	srv := startServer(t)
	out, err := exec.Command(rbsBin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", srv.DataDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("in use by process %d", srv.cmd.Process.Pid)) {
		t.Fatalf("a second server on the same data directory: %v\n%s", err, out)
	}
	rbs(t, srv, "job", "list") // the first one still serves

	out, err = exec.Command(rbsBin, "remote", "serve", "--listen", "0.0.0.0:0", "--data-dir", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without a token") || !strings.Contains(string(out), "--insecure-no-auth") {
		t.Fatalf("a non-loopback server without a token: %v\n%s", err, out)
	}
}
