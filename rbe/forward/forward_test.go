package forward

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func serve(t *testing.T, s *grpc.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func dial(t *testing.T, target string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Calls through the proxy reach the target with their metadata, unary and
// streaming, and come back with its answers and statuses; with no target
// they are UNAVAILABLE.
func TestProxy(t *testing.T) {
	var auth []string
	backend := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth = md.Get("authorization")
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("jobs", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(backend, hs)
	target := serve(t, backend)

	p := New(func(target string) (*grpc.ClientConn, error) {
		return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	defer p.Close()
	client := healthpb.NewHealthClient(dial(t, serve(t, p.Server())))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer t0ken")

	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "jobs"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a call with no target: %v, want UNAVAILABLE", err)
	}
	if err := p.SetTarget(target); err != nil {
		t.Fatal(err)
	}
	r, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "jobs"})
	if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check through the proxy = %v, %v", r, err)
	}
	if len(auth) != 1 || auth[0] != "Bearer t0ken" {
		t.Fatalf("the target saw authorization %q", auth)
	}
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the target's own status came back as %v, want NOT_FOUND", err)
	}
	w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "jobs"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first message of a stream = %v, %v", m, err)
	}
	hs.SetServingStatus("jobs", healthpb.HealthCheckResponse_NOT_SERVING)
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("second message of a stream = %v, %v", m, err)
	}
}
