package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cacheView is what rbs job show --json says of the job cache.
type cacheView struct {
	ID         string   `json:"id"`
	State      string   `json:"state"`
	Cache      string   `json:"cache"`
	CacheKey   string   `json:"cache_key"`
	CachedFrom string   `json:"cached_from"`
	OutputRoot string   `json:"output_root"`
	Sweep      []string `json:"sweep"`
}

func showCache(t *testing.T, srv *server, id string) []cacheView {
	t.Helper()
	out := rbs(t, srv, "job", "show", "--json", id)
	var vs []cacheView
	if strings.HasPrefix(strings.TrimSpace(out), "[") {
		if err := json.Unmarshal([]byte(out), &vs); err != nil {
			t.Fatal(err)
		}
		return vs
	}
	var v cacheView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return []cacheView{v}
}

// pipelineRow is one line of submit's table: JOBID NAME CACHE... AFTER.
var pipelineRow = regexp.MustCompile(`(?m)^(\d+)\s+(\w+)\s+(cached from job \d+|runs)\b`)

// submitPipeline submits //pipe:stages and returns each stage's id and what
// the cache did for it, by name.
func submitPipeline(t *testing.T, srv *server, ws string) (ids, cache map[string]string) {
	t.Helper()
	out, err := run(t, ws, []string{"RBS_REMOTE=" + srv.Addr}, rbsBin, "job", "submit", "//pipe:stages")
	if err != nil {
		t.Fatalf("submitting //pipe:stages: %v\n%s", err, out)
	}
	ids, cache = map[string]string{}, map[string]string{}
	for _, m := range pipelineRow.FindAllStringSubmatch(out, -1) {
		ids[m[2]], cache[m[2]] = m[1], m[3]
	}
	if len(ids) != 3 {
		t.Fatalf("submit printed:\n%s", out)
	}
	return ids, cache
}

// A three-stage pipeline whose stages pass files on: resubmitted
// unchanged, every stage is answered from the cache at once; with its last
// stage edited, the first two are and the last runs, on their outputs.
func TestJobCachePipeline(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	pipe := filepath.Join(ws, "pipe")
	os.MkdirAll(pipe, 0o755)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(pipe, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("prep.sh", "#!/bin/sh\nmkdir -p data && echo rows=3 > data/prep.txt && echo prep ran\n")
	write("feat.sh", "#!/bin/sh\necho \"$(cat data/prep.txt) features\" > data/feat.txt && echo feat ran\n")
	write("report.sh", "#!/bin/sh\nmkdir -p out && echo \"report v1: $(cat data/feat.txt)\" > out/report.txt && echo report ran\n")
	write("BUILD.rbs", `load("@rbs//job/rules.rbs", "batch_job", "job_pipeline")
sh_binary(name = "prep_bin", srcs = ["prep.sh"])
sh_binary(name = "feat_bin", srcs = ["feat.sh"])
sh_binary(name = "report_bin", srcs = ["report.sh"])
batch_job(name = "prep", binary = ":prep_bin", outputs = ["data/prep.txt"], cache = True)
batch_job(name = "feat", binary = ":feat_bin", outputs = ["data/feat.txt"], after = [":prep"], cache = True)
batch_job(name = "report", binary = ":report_bin", outputs = ["out"], after = [":feat"], cache = True)
job_pipeline(name = "stages", jobs = [":prep", ":feat", ":report"])
`)
	report := func(id string) string {
		t.Helper()
		dest := filepath.Join(t.TempDir(), "o")
		rbs(t, srv, "job", "outputs", id, "--dest", dest)
		b, err := os.ReadFile(filepath.Join(dest, "out", "report.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	first, cache := submitPipeline(t, srv, ws)
	for name, c := range cache {
		if c != "runs" {
			t.Fatalf("first submission: %s %q, want runs", name, c)
		}
	}
	rbs(t, srv, "job", "wait", first["prep"], first["feat"], first["report"])
	if got, want := report(first["report"]), "report v1: rows=3 features"; got != want {
		t.Fatalf("first report %q, want %q", got, want)
	}

	// Unchanged: all three answered from the cache before submit returns.
	again, cache := submitPipeline(t, srv, ws)
	for _, name := range []string{"prep", "feat", "report"} {
		if want := "cached from job " + first[name]; cache[name] != want {
			t.Fatalf("unchanged resubmission: %s %q, want %q", name, cache[name], want)
		}
		v := showCache(t, srv, again[name])[0]
		if v.State != "COMPLETED" || v.CachedFrom != first[name] || v.Cache != "on" {
			t.Fatalf("job %s (%s): %+v", again[name], name, v)
		}
	}
	if logs := rbs(t, srv, "job", "logs", again["feat"]); logs != "feat ran\n" {
		t.Fatalf("a cached job's logs are %q, want its origin's", logs)
	}
	if got := report(again["report"]); got != "report v1: rows=3 features" {
		t.Fatalf("cached report %q", got)
	}
	if show := rbs(t, srv, "job", "show", again["report"]); !strings.Contains(show, "cached from job "+first["report"]) {
		t.Fatalf("rbs job show of a cached job:\n%s", show)
	}

	// The last stage edited: the first two are cached, the last runs on
	// their outputs.
	write("report.sh", "#!/bin/sh\nmkdir -p out && echo \"report v2: $(cat data/feat.txt)\" > out/report.txt && echo report ran\n")
	third, cache := submitPipeline(t, srv, ws)
	if cache["prep"] != "cached from job "+first["prep"] || cache["feat"] != "cached from job "+first["feat"] || cache["report"] != "runs" {
		t.Fatalf("after editing report.sh: %v", cache)
	}
	rbs(t, srv, "job", "wait", third["report"])
	if got, want := report(third["report"]), "report v2: rows=3 features"; got != want {
		t.Fatalf("edited report %q, want %q", got, want)
	}

	// --no-cache runs every stage and its results become the entries.
	out, err := run(t, ws, []string{"RBS_REMOTE=" + srv.Addr}, rbsBin, "job", "submit", "--no-cache", "//pipe:stages")
	if err != nil || strings.Count(out, " runs ") != 3 {
		t.Fatalf("--no-cache: %v\n%s", err, out)
	}
}

// A sweep is an array over the product of its values, each task with its
// own in its environment and arguments; extended by a value with --cache,
// only the new tasks run.
func TestSweep(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	sweep := func(lrs string) (string, string) {
		out := rbs(t, srv, "job", "submit", "--cache", "--sweep", "lr="+lrs, "--sweep", "batch=32,64", "--outputs", "out",
			"--", "sh", "-c", `mkdir -p out && echo "{\"loss\": $RBS_SWEEP_BATCH}" > out/metrics.json && echo lr={lr} batch=$RBS_SWEEP_BATCH`)
		m := regexp.MustCompile(`Submitted job (\d+)(.*)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("submit printed %q", out)
		}
		return m[1], strings.TrimSpace(m[2])
	}
	id, note := sweep("0.1,0.01")
	if note != "(runs (no task cached))" {
		t.Fatalf("first sweep: %q", note)
	}
	rbs(t, srv, "job", "wait", id)
	tasks := showCache(t, srv, id)
	if len(tasks) != 4 || strings.Join(tasks[3].Sweep, " ") != "lr=0.01 batch=64" {
		t.Fatalf("the sweep's tasks: %+v", tasks)
	}
	if logs := rbs(t, srv, "job", "logs", id+"_1"); logs != "lr=0.1 batch=64\n" {
		t.Fatalf("task 1 printed %q", logs)
	}
	if show := rbs(t, srv, "job", "show", id+"_2"); !strings.Contains(show, "lr=0.01, batch=32") {
		t.Fatalf("rbs job show of a sweep task:\n%s", show)
	}
	id2, note := sweep("0.1,0.01,0.001")
	if note != "(4 task(s) cached, the rest run)" {
		t.Fatalf("extended sweep: %q", note)
	}
	rbs(t, srv, "job", "wait", id2)
	for _, v := range showCache(t, srv, id2) {
		isNew := strings.Contains(strings.Join(v.Sweep, " "), "lr=0.001")
		if v.State != "COMPLETED" || (v.CachedFrom == "") != isNew {
			t.Errorf("task %s %v: %s, cached from %q", v.ID, v.Sweep, v.State, v.CachedFrom)
		}
	}

	// The tasks compared by the metric they wrote.
	stats := rbs(t, srv, "job", "stats", "--array", id2, "--metric", "out/metrics.json:loss")
	for _, want := range []string{
		`(?m)^` + id2 + `_5\s+lr=0.001 batch=64\s+COMPLETED\s+\S+\s+64$`,
		`(?m)^` + id2 + `_0\s+lr=0.1 batch=32\s+COMPLETED \(cached from ` + id + `_0\)\s+\S+\s+32$`,
		`(?m)^Lowest loss: 32 at ` + id2 + `_0 \(lr=0.1 batch=32\)$`,
		`(?m)^Highest loss: 64 at ` + id2 + `_1 \(lr=0.1 batch=64\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(stats) {
			t.Errorf("job stats --array lacks %q:\n%s", want, stats)
		}
	}
	var rep struct {
		Tasks []struct {
			ID     string   `json:"id"`
			Metric *float64 `json:"metric"`
		} `json:"tasks"`
	}
	out := rbs(t, srv, "job", "stats", "--array", id2, "--metric", "out/metrics.json:loss", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Tasks) != 6 || rep.Tasks[5].Metric == nil || *rep.Tasks[5].Metric != 64 {
		t.Fatalf("job stats --json: %v\n%s", err, out)
	}
	if out, err := run(t, "", []string{"RBS_REMOTE=" + srv.Addr}, rbsBin, "job", "stats", "--array", id2, "--metric", "out/metrics.json"); err == nil || !strings.Contains(out, `invalid --metric "out/metrics.json": want FILE:KEY`) {
		t.Fatalf("a metric without a key: %v\n%s", err, out)
	}
	if out := rbs(t, srv, "job", "stats", "--array", id2, "--metric", "out/metrics.json:acc"); !strings.Contains(out, "- (out/metrics.json has no acc)") {
		t.Fatalf("a metric the tasks lack:\n%s", out)
	}
}

// With named tokens, a user's job is answered only from entries the same
// user's jobs made; a queue's cache = True turns the cache on for its jobs.
func TestJobCacheUsers(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	cfg := filepath.Join(dir, "cluster.rbs")
	os.WriteFile(users, []byte("ann ann-token\nbob bob-token\n"), 0o600)
	os.WriteFile(cfg, []byte(`queue(name = "batch", default = True, cache = True)
queue(name = "plain")
`), 0o644)
	srv := startServer(t, "--token", "shared-token", "--users-file", users, "--config", cfg)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	submitted := regexp.MustCompile(`Submitted job (\d+)(.*)`)
	as := func(token string, args ...string) (id, note string) {
		t.Helper()
		cmd := exec.Command(rbsBin, append([]string{"job", "submit", "--export", "NONE"}, args...)...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		m := submitted.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("submit: %v\n%s", err, out)
		}
		if strings.TrimSpace(m[2]) == "(runs)" {
			rbs(t, srv, "job", "wait", m[1])
		}
		return m[1], strings.TrimSpace(m[2])
	}
	job := []string{"--", "sh", "-c", "echo same work"}
	ann, note := as("ann-token", job...)
	if note != "(runs)" {
		t.Fatalf("ann's first job: %q", note)
	}
	for _, c := range []struct {
		who, token, want string
	}{
		{"ann again", "ann-token", "(cached from job " + ann + ")"},
		{"bob", "bob-token", "(runs)"},
		{"the shared token", "shared-token", "(runs)"},
	} {
		if _, note := as(c.token, job...); note != c.want {
			t.Errorf("%s: %q, want %q", c.who, note, c.want)
		}
	}
	bob, _ := as("bob-token", job...)
	if v := showCache(t, srv, bob)[0]; v.CachedFrom == "" || v.CachedFrom == ann {
		t.Errorf("bob's second job was cached from %q: want bob's own first", v.CachedFrom)
	}
	// A queue without cache = True leaves the cache off.
	if _, note := as("ann-token", append([]string{"--queue", "plain"}, job...)...); note != "" {
		t.Errorf("a job of a queue without the cache: %q", note)
	}
}

// An entry whose outputs the CAS has evicted is a miss: the job runs, and
// its result becomes the entry.
func TestJobCacheEvicted(t *testing.T) {
	srv := startServer(t, "--cas-max-size", "4MiB")
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	note := func(args ...string) (string, string) {
		t.Helper()
		out := rbs(t, srv, append([]string{"job", "submit"}, args...)...)
		m := regexp.MustCompile(`Submitted job (\d+)(.*)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("submit printed %q", out)
		}
		rbs(t, srv, "job", "wait", m[1])
		return m[1], strings.TrimSpace(m[2])
	}
	cached := []string{"--cache", "--outputs", "big", "--", "sh", "-c", "head -c 1048576 /dev/urandom > big"}
	first, _ := note(cached...)
	if _, n := note(cached...); n != "(cached from job "+first+")" {
		t.Fatalf("resubmitted while its outputs are stored: %q", n)
	}
	// Newer outputs, more than the CAS holds, evict the entry's.
	note("--outputs", "fill", "--", "sh", "-c", "mkdir fill && for i in 1 2 3 4 5 6; do head -c 1048576 /dev/urandom > fill/$i; done")
	again, n := note(cached...)
	if n != "(runs)" {
		t.Fatalf("resubmitted once its outputs were evicted: %q, want (runs)", n)
	}
	if v := showCache(t, srv, again)[0]; v.State != "COMPLETED" || v.CachedFrom != "" {
		t.Fatalf("the job after the eviction: %+v", v)
	}
	if _, n := note(cached...); n != "(cached from job "+again+")" {
		t.Fatalf("after the rerun: %q, want it cached from job %s", n, again)
	}
}

// A job after another starts with its outputs; a path its own inputs hold
// differently fails it, naming the path and the job.
func TestUpstreamOutputsConflict(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	first := submit(t, srv, "--outputs", "x.txt", "--", "sh", "-c", "echo upstream > x.txt")
	rbs(t, srv, "job", "wait", first)
	reads := submit(t, srv, "--dependency", "afterok:"+first, "--", "cat", "x.txt")
	rbs(t, srv, "job", "wait", reads)
	if got := rbs(t, srv, "job", "logs", reads); got != "upstream\n" {
		t.Fatalf("the job after %s read %q", first, got)
	}
	in := t.TempDir()
	os.WriteFile(filepath.Join(in, "x.txt"), []byte("mine\n"), 0o644)
	clash := submit(t, srv, "--dependency", "afterok:"+first, "--inputs", in+"/x.txt", "--", "cat", "x.txt")
	waitFor(t, srv, clash, "FAILED", inState("FAILED"))
	if msg := rbs(t, srv, "job", "show", clash); !strings.Contains(msg, "job "+first) || !strings.Contains(msg, "x.txt") {
		t.Fatalf("the clash's message names neither the job nor the path:\n%s", msg)
	}
}
