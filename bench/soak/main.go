// Command soak runs a mixed load on an embedded rbs cluster (rbs remote
// serve --workers 4) for a long while, an hour by default, and reports
// what it held and whether anything grew:
//
//   - arrays, pipelines, two-node gangs, preemptible jobs with jobs of
//     higher priority after them, single jobs, and reservations of a worker
//     coming and going, all submitted through the Jobs API;
//   - a Bazel build of genrules every minute (--remote_executor, a fifth
//     of them changed each time, so that they run), when bazel is found;
//   - the dashboard open in Chromium, following the job list and one job's
//     page, when chromium is found.
//
// Every ten minutes (a window) it prints the jobs that ended per minute,
// the p99 of submit latency (the Submit call) and of start latency (a
// single job's submission to its start), the Bazel builds that passed,
// and the server's RSS and goroutines (read from its /metrics every ten
// seconds, the embedded workers included). At the end it writes a PNG of
// RSS and goroutines over time (gonum/plot) and compares the last window
// with the second (the first holds the start and warming up): a mean more
// than 25% above it, for RSS or goroutines, is reported as growth and
// makes the exit status 1. Ended jobs are kept 15 minutes
// (--job-retention), as a cluster bounds its history.
//
//	go run ./bench/soak [-duration 1h] [-window 10m] [-rbs BINARY] [-out DIR]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	duration := flag.Duration("duration", time.Hour, "how long the load runs")
	window := flag.Duration("window", 10*time.Minute, "the length of a reported window")
	rbsBin := flag.String("rbs", "", "the rbs binary (default: built from this module)")
	out := flag.String("out", ".", "directory to write soak.png into")
	flag.Parse()
	if *window <= 0 || *window > *duration {
		log.Fatalf("-window %v: want a positive window no longer than -duration %v", *window, *duration)
	}
	work, err := os.MkdirTemp("", "rbs-soak-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	if *rbsBin == "" {
		*rbsBin = filepath.Join(work, "rbs")
		build := exec.Command("go", "build", "-o", *rbsBin, "./cmd/rbs")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			log.Fatalf("building rbs: %v", err)
		}
	}
	s := &soak{work: work, start: time.Now(), window: *window}
	if err := s.serve(*rbsBin); err != nil {
		log.Fatal(err)
	}
	defer s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	s.run(ctx)
	fmt.Println()
	grew := s.report(os.Stdout)
	png := filepath.Join(*out, "soak.png")
	if err := s.plot(png); err != nil {
		grew = true
		fmt.Fprintf(os.Stderr, "plotting: %v\n", err)
	} else {
		fmt.Printf("RSS and goroutines over time: %s\n", png)
	}
	if grew {
		s.stop()
		os.RemoveAll(work)
		os.Exit(1)
	}
}

// soak is one run: the server, what was measured, and when.
type soak struct {
	work   string
	start  time.Time
	window time.Duration
	server *exec.Cmd
	addr   string
	jobs   jobspb.JobsClient
	conn   interface{ Close() error }

	mu       sync.Mutex
	submits  []sample  // each Submit call's latency, in seconds
	singles  []int64   // the ids of the single jobs, whose start latency is read at the end
	samples  []process // the server's RSS and goroutines
	builds   []sample  // each Bazel build's seconds; value < 0 for one that failed
	failures []string  // what went wrong, with when
	pageErrs int
}

// sample is a value and when it was taken.
type sample struct {
	at    time.Time
	value float64
}

// process is one reading of the server's /metrics.
type process struct {
	at         time.Time
	rss        float64 // bytes
	heap       float64 // bytes of live and not yet collected objects
	goroutines float64
}

var listening = regexp.MustCompile(`listening on (\S+)`)

// serve starts rbs remote serve --workers 4 with two queues and waits for
// its four workers.
func (s *soak) serve(bin string) error {
	cfg := filepath.Join(s.work, "cluster.rbs")
	if err := os.WriteFile(cfg, []byte("queue(name = \"batch\", default = True)\nqueue(name = \"urgent\", priority = 100)\n"), 0o644); err != nil {
		return err
	}
	s.server = exec.Command(bin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(s.work, "data"),
		"--workers", "4", "--config", cfg, "--job-retention", "15m", "--preempt-grace", "2s")
	stderr, err := s.server.StderrPipe()
	if err != nil {
		return err
	}
	if err := s.server.Start(); err != nil {
		return err
	}
	found, registered := make(chan string, 1), make(chan struct{}, 8)
	logFile, err := os.Create(filepath.Join(s.work, "server.log"))
	if err != nil {
		return err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
			if strings.Contains(line, "msg=registered") {
				registered <- struct{}{}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case s.addr = <-found:
	case <-time.After(time.Minute):
		return errors.New("the server did not start listening")
	}
	for range 4 {
		select {
		case <-registered:
		case <-time.After(time.Minute):
			return errors.New("the embedded workers did not register")
		}
	}
	conn, err := client.Dial(client.Options{Target: s.addr})
	if err != nil {
		return err
	}
	s.conn, s.jobs = conn, jobspb.NewJobsClient(conn)
	fmt.Printf("rbs remote serve --workers 4 on %s; work dir %s\n", s.addr, s.work)
	return nil
}

func (s *soak) stop() {
	s.conn.Close()
	s.server.Process.Kill()
	s.server.Wait()
}

// fail records something that went wrong, without stopping the run.
func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := fmt.Sprintf("%s: %s", time.Since(s.start).Round(time.Second), fmt.Sprintf(format, args...))
	s.failures = append(s.failures, msg)
	fmt.Fprintln(os.Stderr, msg)
}

// job is the manifest of a job running sh -c script.
func job(name, script string, edit func(m *manifest.Manifest)) []byte {
	m := &manifest.Manifest{Version: manifest.Version, Name: name, Command: []string{"sh", "-c", script}, CPUs: 1, Nodes: 1}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// submit sends manifests as one submission, timing the call.
func (s *soak) submit(ctx context.Context, manifests ...[]byte) []int64 {
	t0 := time.Now()
	r, err := s.jobs.Submit(ctx, &jobspb.SubmitRequest{Manifests: manifests, IdempotencyKey: uuid.NewString()})
	if err != nil {
		if ctx.Err() == nil {
			s.fail("submitting: %v", err)
		}
		return nil
	}
	s.mu.Lock()
	s.submits = append(s.submits, sample{t0, time.Since(t0).Seconds()})
	s.mu.Unlock()
	return r.JobIds
}

// every runs fn every d until ctx is done.
func every(ctx context.Context, wg *sync.WaitGroup, d time.Duration, fn func(ctx context.Context)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			fn(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// run drives the load until ctx is done, printing each window as it ends.
func (s *soak) run(ctx context.Context) {
	var wg sync.WaitGroup
	every(ctx, &wg, 2*time.Second, func(ctx context.Context) {
		if ids := s.submit(ctx, job("single", "true", nil)); ids != nil {
			s.mu.Lock()
			s.singles = append(s.singles, ids[0])
			s.mu.Unlock()
		}
	})
	every(ctx, &wg, 20*time.Second, func(ctx context.Context) {
		s.submit(ctx, job("array", "sleep 0.2", func(m *manifest.Manifest) { m.Array = "0-19%2" }))
	})
	every(ctx, &wg, 15*time.Second, func(ctx context.Context) {
		after := func(entry int) func(m *manifest.Manifest) {
			return func(m *manifest.Manifest) {
				m.Outputs = []string{"data"}
				if entry > 0 {
					m.After = []manifest.Dep{{Kind: "afterok", Entry: entry}}
				}
			}
		}
		s.submit(ctx,
			job("prepare", "mkdir -p data && echo 1 > data/a", after(0)),
			job("fit", "cat data/a > data/b", after(1)),
			job("evaluate", "cat data/b", after(2)))
	})
	every(ctx, &wg, 30*time.Second, func(ctx context.Context) {
		s.submit(ctx, job("gang", "sleep 1", func(m *manifest.Manifest) { m.Nodes = 2 }))
	})
	every(ctx, &wg, time.Minute, func(ctx context.Context) {
		s.submit(ctx, job("preemptible", "sleep 20", func(m *manifest.Manifest) { m.Preemptible = true }))
		s.submit(ctx, job("preemptible", "sleep 20", func(m *manifest.Manifest) { m.Preemptible = true }))
		s.submit(ctx, job("urgent", "sleep 1", func(m *manifest.Manifest) { m.Queue = "urgent"; m.Nodes = 3 }))
	})
	every(ctx, &wg, 5*time.Minute, func(ctx context.Context) {
		now := time.Now()
		name := "soak-" + strconv.FormatInt(now.Unix(), 10)
		_, err := s.jobs.Reserve(ctx, &jobspb.ReserveRequest{Reservation: &jobspb.Reservation{
			Name: name, StartUnixMs: now.Add(30 * time.Second).UnixMilli(), EndUnixMs: now.Add(90 * time.Second).UnixMilli(),
			Reason: "soak", Workers: []string{"w4"}}})
		if err != nil && ctx.Err() == nil {
			s.fail("reserving w4: %v", err)
		}
	})
	every(ctx, &wg, 10*time.Second, s.sample)
	if bazel, err := exec.LookPath("bazel"); err == nil {
		ws := s.genrules()
		n := 0
		every(ctx, &wg, time.Minute, func(ctx context.Context) { n++; s.build(ctx, bazel, ws, n) })
	} else {
		fmt.Println("no bazel on PATH: the load runs without a Bazel build every minute")
	}
	if chrome, err := exec.LookPath("chromium"); err == nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.dashboard(ctx, chrome) }()
	} else {
		fmt.Println("no chromium on PATH: the load runs without the dashboard open")
	}
	fmt.Printf("%-8s %10s %12s %12s %8s %10s %11s\n", "window", "jobs/min", "submit p99", "start p99", "builds", "RSS MiB", "goroutines")
	for w := 1; ; w++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-time.After(time.Until(s.start.Add(time.Duration(w) * s.window))):
			s.printWindow(os.Stdout, w)
		}
	}
}

// sample reads the server's RSS and goroutines from its /metrics.
func (s *soak) sample(ctx context.Context) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.fail("reading /metrics: %v", err)
		}
		return
	}
	defer resp.Body.Close()
	p := process{at: time.Now()}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(value, 64)
		switch {
		case err != nil:
		case name == "process_resident_memory_bytes":
			p.rss = v
		case name == "go_goroutines":
			p.goroutines = v
		case name == "go_memstats_heap_alloc_bytes":
			p.heap = v
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, p)
	s.mu.Unlock()
}

// genrules writes a Bazel workspace of 100 genrules in 10 packages.
func (s *soak) genrules() string {
	ws := filepath.Join(s.work, "bazel-ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "WORKSPACE"), []byte("workspace(name = \"soak\")\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".bazelrc"), []byte("build --nosandbox_debug\n"), 0o644)
	return ws
}

// build rewrites the genrules, a fifth of them changed from the last
// build, and builds them on the cluster.
func (s *soak) build(ctx context.Context, bazel, ws string, n int) {
	for p := range 10 {
		var b strings.Builder
		for i := p; i < 100; i += 10 {
			stamp := 0
			if i%5 == n%5 {
				stamp = n
			}
			fmt.Fprintf(&b, "genrule(name = \"g%d\", outs = [\"g%d.txt\"], cmd = \"echo %d-%d > $@\")\n", i, i, i, stamp)
		}
		os.MkdirAll(filepath.Join(ws, fmt.Sprintf("p%d", p)), 0o755)
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("p%d", p), "BUILD"), []byte(b.String()), 0o644)
	}
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, bazel, "--output_user_root="+filepath.Join(s.work, "bazel-root"), "build",
		"--remote_executor=grpc://"+s.addr, "--jobs=8", "//...")
	cmd.Dir = ws
	out, err := cmd.CombinedOutput()
	secs := time.Since(t0).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		s.fail("Bazel build %d: %v\n%s", n, err, lastLines(string(out), 10))
		secs = -1
	}
	s.mu.Lock()
	s.builds = append(s.builds, sample{t0, secs})
	s.mu.Unlock()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dashboard keeps the dashboard open in Chromium: the job list, then the
// page of the newest single job, over and over.
func (s *soak) dashboard(ctx context.Context, chrome string) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(filepath.Join(s.work, "chromium")), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The browser lives as long as the context of its first action:
	// started here, not in a step that times out.
	if err := chromedp.Do(browser); err != nil {
		s.fail("starting chromium: %v", err)
		return
	}
	base := "http://" + s.addr + "/"
	for ctx.Err() == nil {
		s.mu.Lock()
		var id int64
		if len(s.singles) > 0 {
			id = s.singles[len(s.singles)-1]
		}
		s.mu.Unlock()
		steps := []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + "#/jobs"), chromedp.WaitVisible(chromedp.ID("jobs")), chromedp.Sleep(10 * time.Second)}
		if id > 0 {
			steps = append(steps, chromedp.Navigate(base+"#/jobs/"+strconv.FormatInt(id, 10)), chromedp.WaitVisible(chromedp.ID("job-state")), chromedp.Sleep(10*time.Second))
		}
		step, cancelStep := context.WithTimeout(browser, time.Minute)
		err := chromedp.Do(step, steps...)
		cancelStep()
		if err != nil && ctx.Err() == nil {
			s.mu.Lock()
			s.pageErrs++
			s.mu.Unlock()
			s.fail("the dashboard: %v", err)
			select { // then try again, without spinning
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
	}
}

// windowStats are the figures of one window.
type windowStats struct {
	jobsPerMin, submitP99, startP99 float64
	builds, buildsOK                int
	rss, goroutines                 float64 // means
}

// stats works out window w (from 1): the jobs that ended in it, read from
// the server, and the samples taken in it.
func (s *soak) stats(w int) windowStats {
	from, to := s.start.Add(time.Duration(w-1)*s.window), s.start.Add(time.Duration(w)*s.window)
	in := func(t time.Time) bool { return !t.Before(from) && t.Before(to) }
	var st windowStats
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ended, err := list(ctx, s.jobs, &jobspb.ListRequest{EndedAfterUnixMs: from.UnixMilli(), EndedBeforeUnixMs: to.UnixMilli()})
	if err != nil {
		s.fail("listing the jobs that ended: %v", err)
	}
	st.jobsPerMin = float64(len(ended)) / to.Sub(from).Minutes()
	var starts []float64
	for _, j := range ended {
		r := j.Record
		if r.Spec.GetName() == "single" && r.StartUnixMs > 0 && in(time.UnixMilli(r.SubmitUnixMs)) {
			starts = append(starts, float64(r.StartUnixMs-r.SubmitUnixMs)/1000)
		}
	}
	st.startP99 = p99(starts)
	s.mu.Lock()
	defer s.mu.Unlock()
	var submits []float64
	for _, x := range s.submits {
		if in(x.at) {
			submits = append(submits, x.value)
		}
	}
	st.submitP99 = p99(submits)
	for _, b := range s.builds {
		if in(b.at) {
			st.builds++
			if b.value >= 0 {
				st.buildsOK++
			}
		}
	}
	n := 0
	for _, p := range s.samples {
		if in(p.at) {
			st.rss += p.rss
			st.goroutines += p.goroutines
			n++
		}
	}
	if n > 0 {
		st.rss, st.goroutines = st.rss/float64(n), st.goroutines/float64(n)
	}
	return st
}

func (s *soak) printWindow(w io.Writer, n int) {
	st := s.stats(n)
	fmt.Fprintf(w, "%-8s %10.1f %11.1fms %11.1fms %4d/%-3d %10.1f %11.0f\n",
		fmt.Sprintf("%d-%dm", int((time.Duration(n-1)*s.window).Minutes()), int((time.Duration(n)*s.window).Minutes())),
		st.jobsPerMin, 1000*st.submitP99, 1000*st.startP99, st.buildsOK, st.builds, st.rss/(1<<20), st.goroutines)
}

// report prints the totals and compares the last window with the first;
// it reports whether RSS or goroutines grew past 25%.
func (s *soak) report(w io.Writer) bool {
	windows := int(time.Since(s.start) / s.window)
	s.mu.Lock()
	submitted, failures, pageErrs := len(s.submits), slices.Clone(s.failures), s.pageErrs
	s.mu.Unlock()
	fmt.Fprintf(w, "%d submissions over %v; %d problems (%d on the dashboard)\n", submitted, time.Since(s.start).Round(time.Second), len(failures), pageErrs)
	for _, f := range failures {
		fmt.Fprintf(w, "  %s\n", strings.SplitN(f, "\n", 2)[0])
	}
	if windows < 2 {
		fmt.Fprintln(w, "fewer than two windows: no growth to compare")
		return false
	}
	// The first window holds the server's start and warming up: the
	// baseline is the second, when there are three or more.
	base := 1
	if windows >= 3 {
		base = 2
	}
	first, last := s.stats(base), s.stats(windows)
	grew := false
	for _, c := range []struct {
		what        string
		first, last float64
	}{{"RSS MiB", first.rss / (1 << 20), last.rss / (1 << 20)}, {"goroutines", first.goroutines, last.goroutines}} {
		change := 100 * (c.last/c.first - 1)
		verdict := "bounded"
		if change > 25 {
			verdict, grew = "GREW", true
		}
		fmt.Fprintf(w, "%-10s window %d %.1f, last window %.1f: %+.1f%% (%s)\n", c.what, base, c.first, c.last, change, verdict)
	}
	return grew
}

// plot writes RSS and goroutines over time, one above the other.
func (s *soak) plot(file string) error {
	s.mu.Lock()
	samples := slices.Clone(s.samples)
	s.mu.Unlock()
	rss, heap, gor := make(plotter.XYs, len(samples)), make(plotter.XYs, len(samples)), make(plotter.XYs, len(samples))
	for i, p := range samples {
		m := p.at.Sub(s.start).Minutes()
		rss[i] = plotter.XY{X: m, Y: p.rss / (1 << 20)}
		heap[i] = plotter.XY{X: m, Y: p.heap / (1 << 20)}
		gor[i] = plotter.XY{X: m, Y: p.goroutines}
	}
	var plots [][]*plot.Plot
	for _, c := range []struct {
		title, y string
		lines    map[string]plotter.XYs
	}{
		{"rbs remote serve --workers 4: memory", "MiB", map[string]plotter.XYs{"resident (RSS)": rss, "Go heap allocated": heap}},
		{"goroutines", "goroutines", map[string]plotter.XYs{"": gor}},
	} {
		p := plot.New()
		p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.title, "minutes", c.y
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		for i, name := range slices.Sorted(maps.Keys(c.lines)) {
			line, err := plotter.NewLine(c.lines[name])
			if err != nil {
				return err
			}
			line.Dashes = [][]vg.Length{nil, {vg.Points(4), vg.Points(3)}}[i%2]
			p.Add(line)
			if name != "" {
				p.Legend.Add(name, line)
			}
		}
		plots = append(plots, []*plot.Plot{p})
	}
	img := vgimg.New(vg.Points(900), vg.Points(700))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// list gathers the jobs of a List call.
func list(ctx context.Context, jobs jobspb.JobsClient, req *jobspb.ListRequest) ([]*jobspb.JobInfo, error) {
	stream, err := jobs.List(ctx, req)
	if err != nil {
		return nil, err
	}
	var all []*jobspb.JobInfo
	for {
		page, err := stream.Recv()
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
		all = append(all, page.Jobs...)
	}
}

// p99 is the 99th percentile of xs (0 for none).
func p99(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[min(len(xs)-1, len(xs)*99/100)]
}
