package tests

import (
	"strings"
	"testing"

	"github.com/rbs-build/rbs/jobs/store/pgtest"
)

// The batch scheduler's state on PostgreSQL: a server given --state keeps
// its jobs and their output there, and another server, with a data
// directory of its own and the password from PGPASSFILE, carries on from
// them.
func TestStateOnPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	state := pg.NewDatabase(t)

	first := startServer(t, "--state", state, "--state-password-file", pg.PasswordFile)
	startWorker(t, first, "w1")
	id := strings.TrimSpace(rbs(t, first, "job", "submit", "--parsable", "--", "sh", "-c", "echo kept in postgres"))
	rbs(t, first, "job", "wait", id)
	// Only the second server's worker can run this one.
	held := strings.TrimSpace(rbs(t, first, "job", "submit", "--parsable", "--constraint", "pool=second", "--", "echo", "second"))
	first.cmd.Process.Kill()
	first.cmd.Wait()

	t.Setenv("PGPASSFILE", pg.PassFile)
	second := startServer(t, "--state", state)
	if got := rbs(t, second, "job", "logs", id); got != "kept in postgres\n" {
		t.Fatalf("job %s's output on the second server = %q", id, got)
	}
	if show := rbs(t, second, "job", "show", held); !strings.Contains(show, "PENDING") {
		t.Fatalf("the held job on the second server:\n%s", show)
	}
	startWorker(t, second, "w2", "--property", "pool=second")
	rbs(t, second, "job", "wait", held)
	if got := rbs(t, second, "job", "logs", held); got != "second\n" {
		t.Fatalf("job %s's output = %q", held, got)
	}
	next := strings.TrimSpace(rbs(t, second, "job", "submit", "--parsable", "--", "true"))
	if next == id || next == held {
		t.Fatalf("the second server handed out job id %s again", next)
	}
}

// A password in --state is refused before anything is opened, without
// echoing it.
func TestStatePasswordInURLIsRefused(t *testing.T) {
	out, err := run(t, t.TempDir(), nil, rbsBin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--state", "postgres://rbs:hunter2@127.0.0.1:1/rbs")
	if err == nil || !strings.Contains(out, "holds a password") || strings.Contains(out, "hunter2") {
		t.Fatalf("serve with a password in --state: %v\n%s", err, out)
	}
}
