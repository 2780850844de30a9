package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/session"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// webServer is a Server with an HTTP handler that names the protocol of
// each request, serving on 127.0.0.1 until the test ends.
type webServer struct {
	*Server
	addr   string
	served chan error // Serve's result
}

func startWeb(t *testing.T, cfg Config) *webServer {
	t.Helper()
	cfg.CAS = blobstore.ContentAddressed(blobstore.NewMemory())
	cfg.AC = blobstore.NewMemory()
	cfg.HTTP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "web "+r.Proto+" "+r.URL.Path)
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &webServer{Server: New(cfg), addr: lis.Addr().String(), served: make(chan error, 1)}
	go func() { s.served <- s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return s
}

func httpGet(t *testing.T, c *http.Client, url string) (string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.Proto
}

// The port serves gRPC and HTTP side by side: plaintext HTTP/1.1, and under
// TLS both HTTP/1.1 and HTTP/2, while every gRPC call still works; Stop
// stops both.
func TestHTTPOnThePort(t *testing.T) {
	cert, caFile := selfSigned(t, t.TempDir())
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	for _, tc := range []struct {
		name   string
		tls    *tls.Config
		scheme string
		protos []string // the HTTP versions browsers would use
	}{
		{"plaintext", nil, "http", []string{"HTTP/1.1"}},
		{"TLS", &tls.Config{Certificates: []tls.Certificate{cert}}, "https", []string{"HTTP/1.1", "HTTP/2.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startWeb(t, Config{TLS: tc.tls, Token: "tok"})
			dial := client.Options{Target: s.addr, Token: "tok"}
			if tc.tls != nil {
				dial.Target, dial.CACert = "grpcs://"+s.addr, caFile
			}
			conn, err := client.Dial(dial)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for name, err := range calls(t, conn) {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			for _, proto := range tc.protos {
				tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
				if proto == "HTTP/2.0" {
					tr.ForceAttemptHTTP2 = true
				} else {
					tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				c := &http.Client{Transport: tr}
				body, got := httpGet(t, c, tc.scheme+"://"+s.addr+"/metrics")
				if got != proto || body != "web "+proto+" /metrics" {
					t.Errorf("GET /metrics over %s: %s %q", proto, got, body)
				}
				tr.CloseIdleConnections()
			}
			s.Stop()
			if err := <-s.served; err != nil {
				t.Errorf("Serve after Stop: %v", err)
			}
			if _, err := net.Dial("tcp", s.addr); err == nil {
				t.Error("the port still accepts connections after Stop")
			}
		})
	}
}

// Calls are counted by method and code, refused ones too, and action-cache
// lookups by their result.
func TestCallMetrics(t *testing.T) {
	s := startWeb(t, Config{Token: "tok"})
	for _, tok := range []string{"tok", "wrong"} {
		conn, err := client.Dial(client.Options{Target: s.addr, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = repb.NewActionCacheClient(conn).GetActionResult(ctx(t), &repb.GetActionResultRequest{ActionDigest: digest.FromBytes([]byte("no such action")).Proto()})
		if want := map[string]codes.Code{"tok": codes.NotFound, "wrong": codes.Unauthenticated}[tok]; status.Code(err) != want {
			t.Fatalf("GetActionResult with token %q: %v, want %v", tok, err, want)
		}
	}
	const method = "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
	for _, tc := range []struct {
		code string
		want float64
	}{{"NotFound", 1}, {"Unauthenticated", 1}, {"OK", 0}} {
		if got := testutil.ToFloat64(s.metrics.requests.WithLabelValues(method, tc.code)); got != tc.want {
			t.Errorf("rbs_grpc_requests_total{method=%q,code=%q} = %v, want %v", method, tc.code, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(s.metrics.acLookups.WithLabelValues("GetActionResult", "miss")); got != 1 {
		t.Errorf("action-cache misses of GetActionResult = %v, want 1", got)
	}
}

// Each phase is taken from its pair of timestamps, and left out when one is
// missing or they are out of order.
func TestPhaseMetrics(t *testing.T) {
	at := func(s float64) *timestamppb.Timestamp {
		return timestamppb.New(time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))))
	}
	m := newMetrics(nil)
	m.observe(&repb.ExecutedActionMetadata{
		QueuedTimestamp: at(0), WorkerStartTimestamp: at(2),
		InputFetchStartTimestamp: at(2), InputFetchCompletedTimestamp: at(2.5),
		ExecutionStartTimestamp:    at(3),                                        // no end: left out
		OutputUploadStartTimestamp: at(9), OutputUploadCompletedTimestamp: at(8), // out of order
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.phases)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type observed struct {
		count uint64
		sum   float64
	}
	got := map[string]observed{}
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			h := metric.GetHistogram()
			got[metric.GetLabel()[0].GetValue()] = observed{h.GetSampleCount(), h.GetSampleSum()}
		}
	}
	want := map[string]observed{"queued": {1, 2}, "input_fetch": {1, 0.5}, "execution": {0, 0}, "output_upload": {0, 0}}
	if !maps.Equal(got, want) {
		t.Errorf("phases observed %v, want %v", got, want)
	}
}

// The load collector reads the scheduler.
func TestLoadMetrics(t *testing.T) {
	sched := scheduler.New(scheduler.Config{NewID: func() string { return "id" }})
	if _, err := sched.RegisterWorker(session.New(session.Registration{Name: "w", Process: "s", ActionSlots: 3}, time.Now())); err != nil {
		t.Fatal(err)
	}
	c := newLoadCollector(sched)
	want := `
# HELP rbs_slots Slots of the connected workers, by slot class.
# TYPE rbs_slots gauge
rbs_slots{class="action"} 3
# HELP rbs_workers_connected Workers connected to the server, as the action queue sees them.
# TYPE rbs_workers_connected gauge
rbs_workers_connected 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "rbs_slots", "rbs_workers_connected"); err != nil {
		t.Error(err)
	}
}
