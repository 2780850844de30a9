// Package pgtest starts throw-away PostgreSQL servers for tests: a cluster
// made by initdb in a temporary directory, serving 127.0.0.1 on a free port
// with its socket directory inside the temporary directory, a password on
// TCP connections, and fsync off. Server is one running postmaster; each
// test takes a database of its own with NewDatabase.
//
// initdb and postgres refuse to run as root: under root, the server's files
// belong to the postgres user and its processes run as that user.
package pgtest

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// User and Password are the superuser every test server has.
const (
	User     = "rbs"
	Password = "rbs-test-password"
)

// Server is a running PostgreSQL server.
type Server struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// PassFile is a pgpass file holding the password, for PGPASSFILE.
	PassFile string
	// PasswordFile holds the bare password.
	PasswordFile string

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	n    int
	mu   sync.Mutex
}

// Start starts a server of the test's own, killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(requireBin(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

var shared struct {
	mu     sync.Mutex
	server *Server
	err    error
}

// Shared is one server for all the tests of a process that ask for it,
// started by the first; the package's TestMain calls StopShared after
// its tests. Each test takes a database of its own with NewDatabase.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := requireBin(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil && shared.err == nil {
		shared.server, shared.err = start(bin)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.server
}

// StopShared stops the server Shared started, if any.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		shared.server.Close()
		shared.server = nil
	}
}

// requireBin is the directory of PostgreSQL's programs. Without them the
// test is skipped, or fails where RBS_TEST_REQUIRE_ALL=1.
func requireBin(t testing.TB) string {
	t.Helper()
	bin := binDir()
	if bin == "" {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("PostgreSQL's programs (initdb, postgres) are required (RBS_TEST_REQUIRE_ALL=1) but not installed")
		}
		t.Skip("PostgreSQL is not installed; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
	}
	return bin
}

// binDir is the directory of the newest PostgreSQL's programs, "" if none.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

// runAs is who the server's processes run as: the postgres user under
// root, else this process's user (nil).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func start(bin string) (_ *Server, err error) {
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rbs-pgtest-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	s := &Server{dir: dir, PassFile: filepath.Join(dir, "pgpass"), PasswordFile: filepath.Join(dir, "password"), done: make(chan struct{})}
	if err := os.WriteFile(s.PasswordFile, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		// The server's user must reach its directory and read the password.
		for _, p := range []string{dir, s.PasswordFile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", User, "--pwfile", s.PasswordFile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.PassFile, []byte(fmt.Sprintf("127.0.0.1:%d:*:%s:%s\n", s.Port, User, Password)), 0o600); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port), "-h", "127.0.0.1", "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	if err := waitReady(stderr, s.done); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// waitReady reads the server's log until it says it accepts connections,
// then keeps draining it.
func waitReady(log io.Reader, done <-chan struct{}) error {
	lines := bufio.NewScanner(log)
	var seen []string
	for lines.Scan() {
		l := lines.Text()
		if strings.Contains(l, "ready to accept connections") {
			go io.Copy(io.Discard, log)
			return nil
		}
		seen = append(seen, l)
	}
	<-done
	return fmt.Errorf("postgres exited before it was ready:\n%s", strings.Join(seen, "\n"))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is the address of database db, without its password.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: fmt.Sprintf("127.0.0.1:%d", s.Port), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Open connects, with the password, to the database at address, a URL
// that URL or NewDatabase returned.
func (s *Server) Open(address string) (*sql.DB, error) {
	u, err := url.Parse(address)
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword(User, Password)
	return sql.Open("pgx", u.String())
}

// NewDatabase creates an empty database of the test's own and returns its
// URL (without the password: give PassFile as PGPASSFILE, or PasswordFile).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("test%d", s.n)
	s.mu.Unlock()
	db, err := s.Open(s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	return s.URL(name)
}

// Close kills the server and removes its files.
func (s *Server) Close() {
	s.Kill()
	os.RemoveAll(s.dir)
}

// Kill stops the server at once (SIGKILL to its processes) and waits for
// the postmaster to exit.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}
