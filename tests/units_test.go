package tests

import (
	"encoding/json"
	"testing"
)

// TestUnitsAndDurations: every size flag reads the size grammar job targets
// and the server's flags use, and every duration flag reads --time's, a
// bare number being minutes.
func TestUnitsAndDurations(t *testing.T) {
	// These durations were refused by serve before.
	srv := startServer(t, "--worker-timeout", "5", "--preempt-grace", "1d", "--preempt-exempt", "10", "--job-retention", "1d2h", "--cas-max-size", "4G")
	for _, tc := range []struct {
		flags []string
		want  int64
	}{
		{[]string{"--memory-gb", "4G"}, 4 << 30},
		{[]string{"--memory-gb", "2"}, 2 << 30},
		{[]string{"--memory-gb", "1Gi"}, 1 << 30},
		{[]string{"--mem", "4000"}, 4000 << 20},
		{[]string{"--mem", "2G"}, 2 << 30},
	} {
		id := submit(t, srv, append(tc.flags, "--time", "5", "--", "true")...)
		var j struct {
			MemoryBytes      int64 `json:"memory_bytes"`
			TimeLimitSeconds int64 `json:"time_limit_seconds"`
		}
		if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
			t.Fatal(err)
		}
		if j.MemoryBytes != tc.want || j.TimeLimitSeconds != 300 {
			t.Errorf("submit %q --time 5: %d bytes, %ds; want %d bytes, 300s", tc.flags, j.MemoryBytes, j.TimeLimitSeconds, tc.want)
		}
	}
	rbs(t, srv, "job", "stats", "--since", "90")
	rbs(t, srv, "job", "reserve", "w", "--in", "60", "--for", "1d")
}
