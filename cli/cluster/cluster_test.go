package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// serve opens a fully configured cluster on 127.0.0.1 and serves it until
// the test ends.
func serve(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return c
}

// call invokes any method, unary or streaming, with an empty request and
// returns the code of its answer.
func call(t *testing.T, addr, token, method string) codes.Code {
	t.Helper()
	conn, err := client.Dial(client.Options{Target: addr, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	if err != nil {
		return status.Code(err)
	}
	// A send to a stream the server has already ended fails with io.EOF;
	// the call's status comes from RecvMsg either way.
	if err := stream.SendMsg(&emptypb.Empty{}); err == nil {
		stream.CloseSend()
	}
	return status.Code(stream.RecvMsg(&emptypb.Empty{}))
}

// TestEveryMethodIsGuarded calls every method the fully configured server
// registers — taken from the server itself, so a new one cannot be missed —
// without a token, with a wrong one and with each role's token, and checks
// that each refuses what it must and admits what it must.
func TestEveryMethodIsGuarded(t *testing.T) {
	const user, worker = "user-token", "worker-token"
	c := serve(t, Config{Token: user, WorkerToken: worker})
	addr := c.Addr().String()
	methods := c.Methods()
	services := map[string]bool{}
	for _, m := range methods {
		services[strings.Split(m, "/")[1]] = true
	}
	for _, want := range []string{
		"build.bazel.remote.execution.v2.Capabilities", "build.bazel.remote.execution.v2.ContentAddressableStorage",
		"build.bazel.remote.execution.v2.ActionCache", "build.bazel.remote.execution.v2.Execution",
		"google.bytestream.ByteStream", "rbs.jobs.v1.Jobs", "rbs.worker.v1.Workers", "rbs.worker.v1.Cluster",
		"grpc.health.v1.Health",
	} {
		if !services[want] {
			t.Errorf("the server does not register %s; it has %v", want, methods)
		}
	}
	// Who may call what, said here apart from the server's own table.
	admits := func(method, role string) bool {
		switch strings.Split(method, "/")[1] {
		case "rbs.worker.v1.Workers":
			return role == "worker"
		case "build.bazel.remote.execution.v2.ContentAddressableStorage", "google.bytestream.ByteStream",
			"build.bazel.remote.execution.v2.Capabilities", "grpc.health.v1.Health":
			return true
		}
		return role == "user"
	}
	for _, m := range methods {
		t.Run(strings.TrimPrefix(m, "/"), func(t *testing.T) {
			if got := call(t, addr, "", m); got != codes.Unauthenticated {
				t.Errorf("without a token: %v, want Unauthenticated", got)
			}
			if got := call(t, addr, "wrong", m); got != codes.Unauthenticated {
				t.Errorf("with a wrong token: %v, want Unauthenticated", got)
			}
			for role, tok := range map[string]string{"user": user, "worker": worker} {
				got := call(t, addr, tok, m)
				refused := got == codes.Unauthenticated || got == codes.PermissionDenied
				if admits(m, role) && refused {
					t.Errorf("with the %s token: %v, want it admitted", role, got)
				}
				if !admits(m, role) && got != codes.PermissionDenied {
					t.Errorf("with the %s token: %v, want PermissionDenied", role, got)
				}
			}
		})
	}
}

func TestUserTokenMakesAWorkerToken(t *testing.T) {
	dir := t.TempDir()
	c := serve(t, Config{DataDir: dir, Token: "user-token"})
	b, err := os.ReadFile(filepath.Join(dir, "worker-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 || tok == "user-token" {
		t.Fatalf("worker token %q", tok)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "worker-token")); fi.Mode().Perm() != 0o600 {
		t.Errorf("worker-token has mode %v, want 0600", fi.Mode().Perm())
	}
	connect := "/rbs.worker.v1.Workers/Connect"
	if got := call(t, c.Addr().String(), "user-token", connect); got != codes.PermissionDenied {
		t.Errorf("the user token on the worker stream: %v, want PermissionDenied", got)
	}
	if got := call(t, c.Addr().String(), tok, connect); got == codes.PermissionDenied || got == codes.Unauthenticated {
		t.Errorf("the made worker token on the worker stream: %v", got)
	}
}

func TestNoTokenServesLoopbackOnly(t *testing.T) {
	tests := []struct {
		listen   string
		loopback bool
	}{
		{"127.0.0.1:0", true},
		{"127.0.0.2:8980", true},
		{"[::1]:0", true},
		{"localhost:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"[::]:0", false},
		{"10.1.2.3:8980", false},
		{"no port", false},
	}
	for _, tt := range tests {
		if got := Loopback(tt.listen); got != tt.loopback {
			t.Errorf("Loopback(%q) = %v, want %v", tt.listen, got, tt.loopback)
		}
	}
	// A refusal comes before the port is opened; a token or
	// --insecure-no-auth lifts it.
	for _, cfg := range []Config{{Listen: "0.0.0.0:0"}, {Listen: ":8980"}} {
		cfg.DataDir = t.TempDir()
		_, err := Open(cfg)
		if err == nil || !strings.Contains(err.Error(), "--insecure-no-auth") || !strings.Contains(err.Error(), "without a token") {
			t.Fatalf("Open(%q) without a token: %v", cfg.Listen, err)
		}
	}
	c, err := Open(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	c.close()
	if DefaultListen(false) != "127.0.0.1:8980" || DefaultListen(true) != ":8980" {
		t.Fatalf("default listen addresses %q, %q", DefaultListen(false), DefaultListen(true))
	}
}

func TestOneServerPerDataDir(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("a second server on the same data directory: %v", err)
	}
	first.close()
	again, err := Open(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("after the first server closed: %v", err)
	}
	again.close()
}

// A server whose CAS and action cache are another server's, over grpc://,
// keeps what it is sent there.
func TestStoresOnAnotherServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	upstream := serve(t, Config{})
	spec, err := blobstore.Parse("grpc://" + upstream.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	front := serve(t, Config{CAS: spec, AC: spec})
	dial := func(c *Cluster) *grpc.ClientConn {
		conn, err := client.Dial(client.Options{Target: c.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	frontConn, upConn := dial(front), dial(upstream)

	data := []byte("kept upstream")
	d := digest.FromBytes(data)
	if err := client.NewCAS(frontConn, "").Write(ctx, client.Blob{Digest: d, Data: data}); err != nil {
		t.Fatal(err)
	}
	if missing, err := client.NewCAS(upConn, "").FindMissing(ctx, []digest.Digest{d}); err != nil || len(missing) != 0 {
		t.Fatalf("upstream FindMissing = %v, %v; want the blob there", missing, err)
	}
	key := digest.FromBytes([]byte("an action"))
	res := &repb.ActionResult{ExitCode: 7, StdoutDigest: d.Proto()}
	if _, err := repb.NewActionCacheClient(frontConn).UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: key.Proto(), ActionResult: res}); err != nil {
		t.Fatal(err)
	}
	got, err := repb.NewActionCacheClient(upConn).GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: key.Proto()})
	if err != nil || got.ExitCode != 7 {
		t.Fatalf("upstream GetActionResult = %v, %v", got, err)
	}
}

func TestStoreSpecsRefused(t *testing.T) {
	dir := t.TempDir()
	shared, _ := blobstore.Parse("disk:" + filepath.Join(dir, "store"))
	if _, err := Open(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", CAS: shared, AC: shared}); err == nil ||
		!strings.Contains(err.Error(), "both use the disk directory") {
		t.Fatalf("CAS and action cache on one directory: %v", err)
	}
	s3, _ := blobstore.Parse("s3://bucket")
	if _, err := Open(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", CAS: s3}); err == nil || !strings.HasPrefix(err.Error(), "--cas: s3://bucket: ") {
		t.Fatalf("an s3 CAS: %v", err)
	}
}
