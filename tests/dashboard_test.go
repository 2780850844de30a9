package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// artifactDir is where tests leave files for people to look at:
// $RBS_TEST_ARTIFACTS, else rbs-test-artifacts in the temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RBS_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "rbs-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	chrome := requireTool(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// textHas waits until the element sel's text contains want.
func textHas(sel, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(() => { const e = document.querySelector(`+jsString(sel)+`); return !!e && e.textContent.includes(`+jsString(want)+`); })()`,
		chromedp.WithPollingTimeout(time.Minute))
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// The dashboard in a real browser: log in with the token, see the cluster,
// find a submitted job in the list, open it, watch its log lines arrive as
// the job writes them, and cancel it from the page.
func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	const token = "dashboard-token"
	srv := startServer(t, "--token", token)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	gate := filepath.Join(t.TempDir(), "gate")
	id := submit(t, srv, "--name", "web", "--", "sh", "-c",
		"echo first-line; while [ ! -e "+gate+" ]; do sleep 0.05; done; echo second-line; exec sleep 600")
	base := "http://" + srv.Addr

	steps := []struct {
		what    string
		actions []chromedp.Action[chromedp.Void]
	}{
		{"log in", []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(base + "/"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Submit(chromedp.ID("token")),
			chromedp.WaitVisible(chromedp.CSS(`#workers tr[data-worker="w1"]`)),
		}},
		{"find the job in the list", []chromedp.Action[chromedp.Void]{
			chromedp.Navigate(base + "/#/jobs"),
			chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-id="` + id + `"]`)),
			chromedp.Click(chromedp.CSS(`#jobs tr[data-id="`+id+`"] a.job-link`), chromedp.NodeVisible),
		}},
		{"open it and see its first line", []chromedp.Action[chromedp.Void]{
			textHas("#job-state", "RUNNING"),
			textHas("#logs", "first-line"),
		}},
	}
	for _, s := range steps {
		if err := chromedp.Do(ctx, s.actions...); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
	// The page follows the log: a line the job writes now arrives without a
	// reload.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, textHas("#logs", "second-line")); err != nil {
		t.Fatalf("following the log: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	file := filepath.Join(artifactDir(t), "dashboard-job.png")
	if err := os.WriteFile(file, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the job page: %s", file)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("cancel")), textHas("#job-state", "CANCELLED")); err != nil {
		t.Fatalf("cancelling from the page: %v", err)
	}
	if j := show(t, srv, id); j.State != "CANCELLED" {
		t.Fatalf("after cancelling from the page the CLI shows %+v", j)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/actions"), chromedp.WaitVisible(chromedp.ID("action-stats"))); err != nil {
		t.Fatalf("the actions page: %v", err)
	}
}
