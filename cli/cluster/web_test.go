package cluster

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/rbe/client"
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
