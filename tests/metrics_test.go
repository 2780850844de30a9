package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scrape GETs /metrics from srv with the Authorization header auth (none
// for "") and returns the status code and, on 200, each sample's value by
// its name and labels as the text format writes them.
func scrape(t *testing.T, srv *server, auth string) (int, map[string]float64) {
	t.Helper()
	resp := httpGet(t, srv, "/metrics", auth, "")
	defer resp.Body.Close()
	samples := map[string]float64{}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, samples
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, samples
}

// httpGet GETs path from srv over HTTP/1.1 with the Authorization and
// Accept headers given (none for "").
func httpGet(t *testing.T, srv *server, path, auth, accept string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+srv.Addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp
}

// TestMetricsScrape serves HTTP on the gRPC port: /metrics needs the token
// (unless --metrics-public), and a remote build moves the Execute call
// count, the bytes written to the CAS and the execute-phase histogram,
// while the CLI's gRPC calls go on working on the same port and GET /
// answers over HTTP/1.1.
func TestMetricsScrape(t *testing.T) {
	const token = "metrics-token"
	srv := startServer(t, "--token", token)
	startWorker(t, srv, "w1", "--cpus", "2")
	bearer := "Bearer " + token

	if code, _ := scrape(t, srv, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d, want 401", code)
	}
	if code, _ := scrape(t, srv, "Bearer wrong"); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with a wrong token: %d, want 401", code)
	}
	code, before := scrape(t, srv, bearer)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the token: %d", code)
	}
	for name, want := range map[string]float64{`rbs_workers_connected`: 1, `rbs_slots{class="action"}`: 2} {
		if got, ok := before[name]; !ok || got != want {
			t.Errorf("%s = %v (present: %v), want %v", name, got, ok, want)
		}
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	ws.write("scraped/BUILD.rbs", `genrule(name = "out", outs = ["out.txt"], cmd = "echo scraped > $@")`+"\n")
	out := ws.mustRbs("build", "--remote", srv.Addr, "--token-file", tokenFile, "//scraped:out")
	if ran, _ := executed(t, out); ran != 1 {
		t.Fatalf("the remote build ran %d actions, want 1:\n%s", ran, out)
	}

	// And a job, which the batch scheduler's metrics count.
	job := submit(t, srv, "--", "true")
	rbs(t, srv, "job", "wait", job)

	const execute = `rbs_grpc_requests_total{code="OK",method="/build.bazel.remote.execution.v2.Execution/Execute"}`
	const completed = `rbs_jobs{queue="batch",state="COMPLETED"}`
	moved := []string{execute, `rbs_blobstore_written_bytes_total{store="cas"}`, `rbs_execute_phase_seconds_count{phase="execution"}`,
		completed, `rbs_job_pending_seconds_count{queue="batch"}`, `rbs_job_event_seconds_count{event="submit"}`,
		`rbs_job_event_seconds_count{event="end"}`, `rbs_grpc_requests_total{code="OK",method="/rbs.jobs.v1.Jobs/Submit"}`}
	var after map[string]float64
	// The Execute call is counted once its handler returns, which may be
	// just after the client has its answer.
	eventually(t, "the metrics to move", func() bool {
		_, after = scrape(t, srv, bearer)
		for _, name := range moved {
			if after[name] <= before[name] {
				return false
			}
		}
		return true
	}, func() string {
		var b strings.Builder
		for _, name := range moved {
			fmt.Fprintf(&b, "%s: %v before, %v after; ", name, before[name], after[name])
		}
		return b.String()
	})
	if got := after[`rbs_execute_phase_seconds_count{phase="execution"}`]; got != 1 {
		t.Errorf("%v executions observed, want 1", got)
	}
	if got := after[completed]; got != 1 {
		t.Errorf("%s = %v, want 1", completed, got)
	}
	if got := after[`rbs_slots{class="job"}`]; got != before[`rbs_slots{class="job"}`] || got < 1 {
		t.Errorf("job slots %v before, %v after; want the worker's, unchanged", before[`rbs_slots{class="job"}`], got)
	}

	// The CLI's gRPC calls work on the port that serves HTTP.
	var st struct {
		Workers []struct {
			Name string `json:"name"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil || len(st.Workers) != 1 || st.Workers[0].Name != "w1" {
		t.Fatalf("rbs remote status on the same port: %+v, %v", st, err)
	}
	resp := httpGet(t, srv, "/", bearer, "")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/1.1" || !strings.Contains(string(body), "<html") {
		t.Fatalf("GET / over HTTP/1.1: %s %s %v\n%s", resp.Proto, resp.Status, err, body)
	}
	resp = httpGet(t, srv, "/", "", "text/html")
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / from a browser without the token: %s, Location %q; want a redirect to /login", resp.Status, resp.Header.Get("Location"))
	}

	// --metrics-public opens /metrics and nothing else; --log-format json
	// logs JSON.
	public := startServer(t, "--token", token, "--metrics-public", "--log-format", "json")
	if code, samples := scrape(t, public, ""); code != http.StatusOK || samples["rbs_workers_connected"] != 0 {
		t.Fatalf("/metrics of a --metrics-public server without the token: %d, %v", code, samples["rbs_workers_connected"])
	}
	resp = httpGet(t, public, "/", "", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET / of a --metrics-public server without the token: %s, want 401", resp.Status)
	}
	eventually(t, "a JSON log line", func() bool {
		return strings.Contains(public.log.String(), `{"time":`) && strings.Contains(public.log.String(), `"msg":"serving"`)
	},
		func() string { return public.log.String() })
}
