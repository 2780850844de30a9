package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if want := "listening on " + srv.Addr + " (dashboard: " + base + "/)"; !strings.Contains(srv.log.String(), want) {
		t.Errorf("the server's log does not say %q:\n%s", want, srv.log.String())
	}
	checkWebAPI(t, srv, id)

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

	// A sweep task answered from the cache shows its values and the job
	// it was answered with.
	sweep := []string{"--cache", "--sweep", "lr=0.1,0.01", "--", "sh", "-c", "echo {lr}"}
	first := submit(t, srv, sweep...)
	rbs(t, srv, "job", "wait", first)
	again := submit(t, srv, sweep...)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/#/jobs/"+again+"_1"),
		textHas("#job-cached", "cached from job "+first+"_1"), textHas("#job-sweep", "lr=0.01")); err != nil {
		t.Fatalf("a cached sweep task's page: %v", err)
	}
}

// apiGet reads a JSON answer of the web API with srv's token.
func apiGet(t *testing.T, srv *server, path string, v any) {
	t.Helper()
	resp := httpGet(t, srv, path, "Bearer "+srv.token, "")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s %q", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %q", path, err, b)
	}
}

// checkWebAPI holds the web API to the CLI's --json: the same documents,
// numbers as numbers, an index at /api/, and /api/jobs listing what
// rbs job list does (id, a running job, being among them).
func checkWebAPI(t *testing.T, srv *server, id string) {
	t.Helper()
	// Running and blocked after its first line, the job stands still.
	waitFor(t, srv, id, "RUNNING", inState("RUNNING"))
	eventually(t, "job "+id+"'s first line", func() bool { return rbs(t, srv, "job", "logs", id) == "first-line\n" }, func() string { return rbs(t, srv, "job", "logs", id) })
	waitFor(t, srv, id, "its first line stored", func(j jobView) bool { return j.OutputBytes > 0 })
	var index struct {
		Endpoints []struct{ Method, Path, Description string }
	}
	apiGet(t, srv, "/api/", &index)
	paths := map[string]bool{}
	for _, e := range index.Endpoints {
		paths[e.Method+" "+e.Path] = e.Description != ""
	}
	for _, p := range []string{"GET /api/jobs", "GET /api/jobs/{id}", "POST /api/jobs/{id}/cancel", "GET /api/status", "GET /api/queues", "GET /api/actions"} {
		if !paths[p] {
			t.Errorf("GET /api/ lists no %s (or without a description): %+v", p, index)
		}
	}
	resp := httpGet(t, srv, "/api/nothing", "Bearer "+srv.token, "")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "GET /api/ lists them") {
		t.Errorf("GET /api/nothing: %s %q", resp.Status, b)
	}
	// The same job through both: one schema, so the same keys and values,
	// but for what moves on its own while it runs.
	var web, cli map[string]any
	apiGet(t, srv, "/api/jobs/"+id, &web)
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &cli); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]any{web, cli} {
		delete(m, "priority") // its age part grows
	}
	if fmt.Sprint(web) != fmt.Sprint(cli) {
		t.Errorf("GET /api/jobs/%s and rbs job show --json differ:\n%v\n%v", id, web, cli)
	}
	if _, ok := web["memory_bytes"].(float64); !ok {
		t.Errorf("memory_bytes is %T, want a number", web["memory_bytes"])
	}
	if web["array_index"] != nil || web["time_limit_seconds"] == nil {
		t.Errorf("array_index %v, time_limit_seconds %v", web["array_index"], web["time_limit_seconds"])
	}
	var list []map[string]any
	apiGet(t, srv, "/api/jobs", &list)
	var cliList []map[string]any
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--json")), &cliList); err != nil {
		t.Fatal(err)
	}
	if len(list) != len(cliList) || len(list) != 1 || list[0]["id"] != id {
		t.Errorf("GET /api/jobs lists %v, rbs job list --json %v; want job %s alone", list, cliList, id)
	}
	var st struct {
		Workers []struct {
			Name string
			CPUs int `json:"cpus"`
		}
	}
	apiGet(t, srv, "/api/status", &st)
	if len(st.Workers) != 1 || st.Workers[0].Name != "w1" || st.Workers[0].CPUs != 2 {
		t.Errorf("GET /api/status: %+v", st)
	}
}
