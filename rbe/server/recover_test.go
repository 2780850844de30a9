package server

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// panicky panics in its unary and its streaming method.
type panicky struct {
	healthpb.UnimplementedHealthServer
}

func (panicky) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	panic("unary boom")
}

func (panicky) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	var m map[string]int
	m["x"] = 1 // a nil map write: a runtime panic
	return nil
}

func TestRecoveryTurnsPanicsIntoInternal(t *testing.T) {
	var logged bytes.Buffer
	g := grpc.NewServer(recovery(slog.New(slog.NewTextHandler(&logged, nil)))...)
	healthpb.RegisterHealthServer(g, panicky{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := client.Dial(client.Options{Target: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for i := 0; i < 2; i++ { // the second round shows the server still serves
		if _, err := hc.Check(ctx(t), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Internal {
			t.Fatalf("unary panic answered %v, want INTERNAL", err)
		}
		w, err := hc.Watch(ctx(t), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if status.Code(err) != codes.Internal {
			t.Fatalf("streaming panic answered %v, want INTERNAL", err)
		}
	}
	for _, want := range []string{"unary boom", "assignment to entry in nil map", "/grpc.health.v1.Health/Check", "goroutine"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log does not hold %q:\n%s", want, logged.String())
		}
	}
}
