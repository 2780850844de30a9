package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/worker"
)

// The port answers HTTP beside gRPC: /metrics holds the collectors of
// every part and those given, behind the token unless MetricsPublic.
func TestMetricsEndpoint(t *testing.T) {
	const token = "user-token"
	extra := prometheus.NewCounter(prometheus.CounterOpts{Name: "rbs_test_extra_total", Help: "A collector given in the Config."})
	extra.Add(7)
	for _, tc := range []struct {
		name   string
		public bool
		auth   string
		code   int
	}{
		{"with the token", false, "Bearer " + token, http.StatusOK},
		{"without it", false, "", http.StatusUnauthorized},
		{"with a wrong one", false, "Bearer wrong", http.StatusUnauthorized},
		{"public without a token", true, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, Config{Token: token, MetricsPublic: tc.public, Collectors: []prometheus.Collector{extra}})
			addr := dialAddr(c.Addr())
			conn, err := client.Dial(client.Options{Target: addr, Token: token})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := client.Ping(t.Context(), conn); err != nil {
				t.Fatalf("a gRPC call on the same port: %v", err)
			}
			req, err := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code {
				t.Fatalf("GET /metrics: %d, want %d\n%s", resp.StatusCode, tc.code, body)
			}
			if tc.code != http.StatusOK {
				return
			}
			for _, want := range []string{
				`rbs_grpc_requests_total{code="OK",method="/build.bazel.remote.execution.v2.Capabilities/GetCapabilities"} 1`,
				`rbs_blobstore_lookups_total{store="cas"}`,
				`rbs_blobstore_evictions_total{store="ac"} 0`,
				`rbs_slots{class="action"} 0`,
				`rbs_slots{class="job"} 0`,
				`rbs_execute_phase_seconds_count{phase="execution"} 0`,
				`rbs_action_cache_lookups_total{method="Execute",result="hit"} 0`,
				`rbs_slots_in_use{class="job"} 0`,
				"go_goroutines ",
				"process_cpu_seconds_total ",
				"rbs_test_extra_total 7",
			} {
				if !strings.Contains(string(body), want) {
					t.Errorf("/metrics lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

// heard is a slog.Handler that closes a channel when a record with its
// message is logged.
type heard struct {
	msg  string
	once *sync.Once
	ch   chan struct{}
}

func newHeard(msg string) heard { return heard{msg: msg, once: &sync.Once{}, ch: make(chan struct{})} }

func (h heard) Enabled(context.Context, slog.Level) bool { return true }
func (h heard) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h heard) WithGroup(string) slog.Handler            { return h }
func (h heard) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

// Under TLS one net/http server takes the port: an in-process worker's
// stream (both ways) and gRPC calls reach gRPC, and HTTP/1.1 and HTTP/2
// requests the web endpoint.
func TestTLSPort(t *testing.T) {
	const token = "user-token"
	dir := t.TempDir()
	certFile, keyFile, roots := selfSigned(t, dir)
	registered := newHeard("registered")
	c := serve(t, Config{Token: token, TLSCert: certFile, TLSKey: keyFile, Workers: []worker.Config{{
		Name: "w1", WorkDir: filepath.Join(dir, "w1"), ActionSlots: 1, JobSlots: 1, CPUs: 1, MemoryBytes: 1 << 30,
		CacheMaxSize: 1 << 30, Log: slog.New(registered),
	}}})
	addr := dialAddr(c.Addr())
	select {
	case <-registered.ch:
	case <-time.After(time.Minute):
		t.Fatal("the in-process worker did not register over TLS")
	}
	conn, err := client.Dial(client.Options{Target: "grpcs://" + addr, Token: token, CACert: filepath.Join(dir, "cert.pem")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := workerpb.NewClusterClient(conn).Status(t.Context(), &workerpb.StatusRequest{})
	if err != nil || len(st.Workers) != 1 {
		t.Fatalf("Status over TLS: %v, %v", st, err)
	}
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		req, err := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "rbs_workers_connected 1") {
			t.Fatalf("GET /metrics over %s: %s %v\n%s", resp.Proto, resp.Status, err, body)
		}
		if want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; resp.Proto != want {
			t.Fatalf("GET /metrics went over %s, want %s", resp.Proto, want)
		}
		tr.CloseIdleConnections()
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir/cert.pem and dir/key.pem, and returns their paths and a pool
// trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rbs test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, roots
}
