// Package s3test starts a real S3 server for tests: a throw-away one-node
// Ceph cluster (one monitor, one OSD that keeps its data in memory, and
// radosgw on 127.0.0.1) under the test's temporary directory, with an S3
// user and a bucket. Start returns its Server; everything is killed when the
// test ends.
//
// It needs Ceph's daemons (Debian: apt-get install --no-install-recommends
// ceph-mon ceph-osd radosgw). Without them the test is skipped, or fails
// when RBS_TEST_REQUIRE_ALL=1.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/errgroup"
)

// Server is a running S3 server with one user and one bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Region    string
	AccessKey string
	SecretKey string
	Bucket    string // created empty by Start
}

// The user, region and bucket of every Server.
const (
	accessKey = "rbs-test-access-key"
	secretKey = "rbs-test-secret-key"
	region    = "us-east-1"
	bucket    = "rbs-test"
)

// startTimeout bounds the whole start; it is ready in a few seconds on an
// idle machine.
const startTimeout = 2 * time.Minute

// programs are the Ceph programs Start runs.
var programs = []string{"monmaptool", "ceph-mon", "ceph-osd", "ceph", "radosgw", "radosgw-admin"}

// Start starts a Ceph cluster with radosgw on a free port of 127.0.0.1,
// creates a user with known keys and an empty bucket, and returns once the
// bucket exists. The cluster is killed on t's cleanup. Without Ceph's
// programs the test is skipped, or fails where RBS_TEST_REQUIRE_ALL=1.
func Start(t testing.TB) *Server {
	t.Helper()
	if err := missing(); err != nil {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("%v (RBS_TEST_REQUIRE_ALL=1)", err)
		}
		t.Skipf("%v; set RBS_TEST_REQUIRE_ALL=1 to make this a failure", err)
	}
	began := time.Now()
	s, stop, err := Run(tempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	t.Logf("S3 server (Ceph radosgw) at %s ready in %v", s.Endpoint, time.Since(began).Round(time.Millisecond))
	return s
}

// missing says which of Ceph's programs is not installed, if any.
func missing() error {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("an S3 server needs Ceph (apt-get install --no-install-recommends ceph-mon ceph-osd radosgw): %s not found", p)
		}
	}
	return nil
}

// Run is Start for programs other than tests (benchmarks): it starts the
// cluster in dir, which the caller removes, and returns the server and a
// function that kills it.
func Run(dir string) (*Server, func(), error) {
	if err := missing(); err != nil {
		return nil, nil, err
	}
	c := &cluster{dir: dir, died: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// A daemon that exits ends the start: whatever waits for it would wait
	// in vain.
	go func() {
		select {
		case <-c.died:
			cancel()
		case <-ctx.Done():
		}
	}()
	s, err := c.start(ctx)
	if err != nil {
		c.kill()
		return nil, nil, fmt.Errorf("starting an S3 server (Ceph radosgw) in %s: %v\n%s", c.dir, err, c.logs())
	}
	return s, c.kill, nil
}

// tempDir returns a directory for the cluster. Ceph's configuration file
// gives '#', ';' and '$' meanings, so a test name that puts them into
// t.TempDir's path gets a plain directory instead.
func tempDir(t testing.TB) string {
	dir := t.TempDir()
	if !strings.ContainsAny(dir, "#;$ \t\"'\\=[]") {
		return dir
	}
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cluster is the processes of one Start.
type cluster struct {
	dir  string
	died chan struct{} // closed when the first daemon exits
	once sync.Once

	mu      sync.Mutex
	daemons []*daemon
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

func (c *cluster) start(ctx context.Context) (*Server, error) {
	monPort, err := freePort()
	if err != nil {
		return nil, err
	}
	rgwPort, err := freePort()
	if err != nil {
		return nil, err
	}
	fsid, osdUUID := uuid.NewString(), uuid.NewString()
	conf := filepath.Join(c.dir, "ceph.conf")
	for _, d := range []string{"mon", "osd", "rgw", "run"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(conf, []byte(config(c.dir, fsid, monPort, rgwPort)), 0o644); err != nil {
		return nil, err
	}
	// The OSD's store needs no monitor: it is made meanwhile.
	var osdMkfs errgroup.Group
	osdMkfs.Go(func() error {
		return c.run(ctx, "ceph-osd", "-c", conf, "-i", "0", "--mkfs", "--no-mon-config", "--osd-uuid", osdUUID)
	})
	err = c.startMon(ctx, conf, fsid, monPort)
	if err == nil {
		// radosgw starts up while the OSD joins, then waits for it.
		err = c.daemon("radosgw", "-c", conf, "-f", "-n", "client.rgw")
	}
	if err == nil {
		err = c.run(ctx, "ceph", "-c", conf, "osd", "new", osdUUID, "0")
	}
	if merr := osdMkfs.Wait(); err == nil {
		err = merr
	}
	if err != nil {
		return nil, err
	}
	if err := c.daemon("ceph-osd", "-c", conf, "-f", "-i", "0"); err != nil {
		return nil, err
	}
	// This returns once the OSD serves radosgw's pools.
	if err := c.run(ctx, "radosgw-admin", "-c", conf, "user", "create", "--uid=rbs-test", "--display-name=rbs test",
		"--access-key="+accessKey, "--secret-key="+secretKey); err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", rgwPort),
		Region:    region,
		AccessKey: accessKey,
		SecretKey: secretKey,
		Bucket:    bucket,
	}
	if err := c.waitAccepting(ctx, fmt.Sprintf("127.0.0.1:%d", rgwPort)); err != nil {
		return nil, err
	}
	if err := c.makeBucket(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// startMon makes the monitor's store and starts it.
func (c *cluster) startMon(ctx context.Context, conf, fsid string, port int) error {
	monmap := filepath.Join(c.dir, "monmap")
	if err := c.run(ctx, "monmaptool", "--create", "--add", "a", fmt.Sprintf("v2:127.0.0.1:%d", port), "--fsid", fsid, monmap); err != nil {
		return err
	}
	if err := c.run(ctx, "ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", monmap); err != nil {
		return err
	}
	return c.daemon("ceph-mon", "-c", conf, "-f", "-i", "a")
}

// config is the cluster's ceph.conf. No authentication (with every
// messenger mode "crc secure", or radosgw cannot fetch its configuration
// from the monitor), fast Paxos rounds, pools of one replica and one
// placement group, and an OSD whose objects live in its memory.
func config(dir, fsid string, monPort, rgwPort int) string {
	return fmt.Sprintf(`[global]
fsid = %[2]s
mon host = v2:127.0.0.1:%[3]d
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc secure
ms client mode = crc secure
ms service mode = crc secure
ms cluster mode = crc secure
ms mon service mode = crc secure
ms mon cluster mode = crc secure
paxos propose interval = 0.05
paxos min wait = 0.01
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
rgw rados pool pg num min = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail crit = 0
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 1073741824
mon data = %[1]s/mon
osd data = %[1]s/osd
rgw data = %[1]s/rgw
run dir = %[1]s/run
admin socket =
log file = %[1]s/$name.log
keyring = /dev/null
rgw frontends = beast endpoint=127.0.0.1:%[4]d
`, dir, fsid, monPort, rgwPort)
}

// run runs a program to completion, its output going into the error if it
// fails.
func (c *cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.dir
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %v", name, strings.Join(args, " "), c.stopped())
	}
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// daemon starts a program that runs until the cluster is killed, its output
// going to NAME.out in the cluster's directory.
func (c *cluster) daemon(name string, args ...string) error {
	out, err := os.Create(filepath.Join(c.dir, name+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = env()
	cmd.Stdout, cmd.Stderr = out, out
	// Killed with the test process if it dies before its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
		c.once.Do(func() { close(c.died) })
	}()
	c.mu.Lock()
	c.daemons = append(c.daemons, d)
	c.mu.Unlock()
	return nil
}

// env is the environment of Ceph's programs: the test's, less what would
// point them at another cluster.
func env() []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CEPH_") {
			e = append(e, kv)
		}
	}
	return e
}

// stopped says why the start was cut short: a daemon exited, or it took
// too long.
func (c *cluster) stopped() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.daemons {
		select {
		case <-d.done:
			return fmt.Errorf("%s exited: %v", d.name, d.err)
		default:
		}
	}
	return fmt.Errorf("not done after %v", startTimeout)
}

// poll calls try every few milliseconds until it succeeds, a daemon exits
// or ctx ends.
func (c *cluster) poll(ctx context.Context, what string, try func() error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %v (last try: %v)", what, c.stopped(), err)
		case <-tick.C:
		}
	}
}

func (c *cluster) waitAccepting(ctx context.Context, addr string) error {
	return c.poll(ctx, "waiting for radosgw to accept connections on "+addr, func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	})
}

func (c *cluster) makeBucket(ctx context.Context, s *Server) error {
	client, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	})
	if err != nil {
		return err
	}
	return c.poll(ctx, "creating bucket "+s.Bucket, func() error {
		err := client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region})
		if errors.As(err, new(minio.ErrorResponse)) && minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
			return nil // an earlier try got through
		}
		return err
	})
}

// kill kills the daemons with SIGKILL: the cluster is thrown away, and
// SIGTERM would cost seconds each.
func (c *cluster) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.daemons {
		d.cmd.Process.Kill()
	}
	for _, d := range c.daemons {
		<-d.done
	}
}

// logs returns the end of each daemon's log, for a failed start.
func (c *cluster) logs() string {
	var b strings.Builder
	for _, name := range []string{"ceph-mon.out", "mon.a.log", "ceph-osd.out", "osd.0.log", "radosgw.out", "client.rgw.log"} {
		data, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "--- %s (end)\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
