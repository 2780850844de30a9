// Package tests holds rbs's end-to-end tests: they build the real rbs binary,
// start real servers (and later workers) on 127.0.0.1, and drive them with the
// real CLI and real external clients such as Bazel.
package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/memlimit"
)

// rbsBin is the rbs binary built once for all tests.
var rbsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rbs-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rbsBin = filepath.Join(dir, "rbs")
	build := exec.Command("go", "build", "-o", rbsBin, "../cmd/rbs")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building rbs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireTool returns the path of an external program, skipping the test
// when it is missing — unless RBS_TEST_REQUIRE_ALL=1 (as in CI), where a
// missing program fails the test.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
		t.Fatalf("%s is required (RBS_TEST_REQUIRE_ALL=1) but not installed: %v", name, err)
	}
	t.Skipf("%s not installed; set RBS_TEST_REQUIRE_ALL=1 to make this a failure", name)
	return ""
}

// logBuffer collects a process's log lines; tests read it while the process
// writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) WriteString(s string) {
	l.mu.Lock()
	l.b.WriteString(s)
	l.mu.Unlock()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is a running `rbs remote serve` process.
type server struct {
	Addr    string
	DataDir string
	token   string
	args    []string
	cmd     *exec.Cmd
	log     *logBuffer
	// registered has a value for each "registered" line of in-process
	// workers (rbs remote serve --workers) in the log.
	registered chan struct{}
	// logged is closed once the whole log is read: the process and
	// everything it started have closed its stderr.
	logged chan struct{}
}

// exited waits for the server's process to exit, its log read to the end
// (cmd.Wait alone may close the pipe before its last lines are read), and
// returns how it exited.
func (s *server) exited(t *testing.T) error {
	t.Helper()
	select {
	case <-s.logged:
	case <-time.After(time.Minute):
		t.Fatalf("the server did not exit within a minute; log:\n%s", s.log.String())
	}
	return s.cmd.Wait()
}

var listening = regexp.MustCompile(`listening on (\S+)`)

// startServer runs `rbs remote serve` on 127.0.0.1 with a fresh data
// directory and waits until it listens. A "--token T" pair in args is given
// to the server as a token file, the way users give one; its workers then
// use the worker token the server keeps in its data directory.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startServerIn(t, t.TempDir(), args...)
}

// startServerIn is startServer with the data directory dir.
func startServerIn(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	s := &server{DataDir: dir, log: &logBuffer{}, registered: make(chan struct{}, 64)}
	listen := "127.0.0.1:0"
	for i := 0; i < len(args); i++ {
		if args[i] == "--listen" && i+1 < len(args) {
			listen = args[i+1]
			i++
			continue
		}
		if args[i] == "--token" && i+1 < len(args) {
			s.token = args[i+1]
			file := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(file, []byte(s.token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s.args = append(s.args, "--token-file", file)
			i++
			continue
		}
		s.args = append(s.args, args[i])
	}
	s.start(t, listen)
	if host, _, _ := net.SplitHostPort(listen); host == "0.0.0.0" {
		// Served on every address: clients in the test's own network reach
		// it on loopback.
		_, port, _ := net.SplitHostPort(s.Addr)
		s.Addr = net.JoinHostPort("127.0.0.1", port)
	}
	return s
}

func (s *server) start(t *testing.T, listen string) {
	t.Helper()
	full := append([]string{"remote", "serve", "--listen", listen, "--data-dir", s.DataDir}, s.args...)
	s.cmd = exec.Command(rbsBin, full...)
	s.logged = make(chan struct{})
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		defer close(s.logged)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.log.WriteString(line + "\n")
			if m := listening.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
			if strings.Contains(line, "msg=registered") {
				select {
				case s.registered <- struct{}{}:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case s.Addr = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not start listening; log:\n%s", s.log.String())
	}
}

// waitRegistered waits until n in-process workers of the server have
// registered.
func (s *server) waitRegistered(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-s.registered:
		case <-timeout:
			t.Fatalf("%d of %d in-process workers registered; log:\n%s", i, n, s.log.String())
		}
	}
}

// worker is a running `rbs remote worker` process.
type worker struct {
	Name    string
	WorkDir string
	cmd     *exec.Cmd
	log     *logBuffer
}

// startWorker runs `rbs remote worker` against srv and waits until it has
// registered.
func startWorker(t *testing.T, srv *server, name string, args ...string) *worker {
	t.Helper()
	return launchWorker(t, srv, srv.Addr, nil, name, args...)
}

// launchWorker is startWorker with the worker reaching srv at addr, its
// command run under prefix (such as `ip netns exec NAME`).
func launchWorker(t *testing.T, srv *server, addr string, prefix []string, name string, args ...string) *worker {
	t.Helper()
	w := &worker{Name: name, WorkDir: t.TempDir(), log: &logBuffer{}}
	full := append(append([]string{}, prefix...), rbsBin, "remote", "worker", "--server", addr, "--name", name, "--work-dir", w.WorkDir)
	if srv.token != "" {
		full = append(full, "--worker-token-file", filepath.Join(srv.DataDir, "worker-token"))
	}
	full = append(full, args...)
	w.cmd = exec.Command(full[0], full[1:]...)
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		w.cmd.Wait()
		// A killed worker leaves the memory groups it kept for jobs, for
		// the next worker to sweep; none comes after the tests.
		prefix := fmt.Sprintf("rbs-job-%d-", w.cmd.Process.Pid)
		if _, err := memlimit.Sweep(func(name string) bool { return strings.HasPrefix(name, prefix) }); err != nil {
			t.Errorf("removing the memory groups of worker %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("worker %s log:\n%s", name, w.log.String())
		}
	})
	registered := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			w.log.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "msg=registered") {
				once = true
				close(registered)
			}
		}
	}()
	select {
	case <-registered:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker %s did not register; log:\n%s", name, w.log.String())
	}
	return w
}

// rbs runs the rbs CLI against srv and returns its stdout, failing the test
// on a non-zero exit.
func rbs(t *testing.T, srv *server, args ...string) string {
	t.Helper()
	cmd := exec.Command(rbsBin, args...)
	cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rbs %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// run runs a command with a deadline and returns its combined output.
func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// relay listens on ip, on a port of its own, and joins each connection to
// a new one to target: what the client sends is copied by up, what the
// server sends by down, and both connections close once either copy ends.
// It returns the address to dial.
func relay(t *testing.T, ip, target string, up, down func(dst io.Writer, src io.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close() // the server is down: so is the client's connection
				continue
			}
			go func() { down(c, s); c.Close(); s.Close() }()
			go func() { up(s, c); c.Close(); s.Close() }()
		}
	}()
	return ln.Addr().String()
}

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if rel == "rbs-out" || rel == "rbs-bin" || strings.HasPrefix(rel, "bazel-") {
			if info.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}
