// Package clustertest starts an in-process rbs cluster for tests of
// packages that need a real one: a server with an in-memory CAS and action
// cache and the execution scheduler, and one worker connected to it.
//
// The worker makes the test process a child subreaper that reaps orphaned
// processes; tests that also run processes of their own should not run
// them while a cluster is up.
package clustertest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/server"
	"github.com/rbs-build/rbs/rbe/worker"
	"google.golang.org/grpc"
)

// Cluster is a running in-process cluster, stopped when the test ends.
type Cluster struct {
	Addr  string
	Conn  *grpc.ClientConn
	CAS   blobstore.Store
	Sched *scheduler.Scheduler
}

// Start starts a server and one worker with four action slots, and waits
// until the worker has registered.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{CAS: blobstore.ContentAddressed(blobstore.NewMemory()), Sched: scheduler.New(scheduler.Config{NewID: uuid.NewString})}
	srv := server.New(server.Config{CAS: c.CAS, AC: blobstore.NewMemory(), Scheduler: c.Sched, HeartbeatInterval: 200 * time.Millisecond})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c.Addr = lis.Addr().String()
	if c.Conn, err = client.Dial(client.Options{Target: c.Addr}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Conn.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Config{Server: client.Options{Target: c.Addr}, WorkDir: t.TempDir(), Name: "w", ActionSlots: 4, CPUs: 1, CacheMaxSize: 1 << 30})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); len(c.Sched.Status().Workers) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker never registered")
		}
	}
	return c
}
