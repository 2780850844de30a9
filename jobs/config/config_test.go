package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name, src string
		want      string
		err       string
	}{
		{"queues", `queue(name = "batch")
queue(name = "gpu", priority = 10, max_time = "2d")
queue(name = "debug", priority = 100, max_time = "30m", default = True)`, "batch:0:0s gpu:10:48h0m0s debug*:100:30m0s", ""},
		{"first is default", `queue(name = "a")
queue(name = "b")`, "a*:0:0s b:0:0s", ""},
		{"bad time", `queue(name = "a", max_time = "forever")`, "", `invalid time limit "forever"`},
		{"twice", `queue(name = "a")
queue(name = "a")`, "", "declared twice"},
		{"two defaults", `queue(name = "a", default = True)
queue(name = "b", default = True)`, "", "marks 2 queues as default"},
		{"none", `x = 1`, "", "declares no queue"},
		{"unknown argument", `queue(name = "a", size = 3)`, "", "unexpected keyword argument"},
		{"syntax", `queue(`, "", "cluster.rbs"},
		{"bad age interval", `queue(name = "a")
age_priority(every = "sometimes")`, "", `age_priority: invalid time limit "sometimes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cluster.rbs")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Load = %v, %v; want error %q", c, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			qs := c.Queues
			var parts []string
			for _, q := range qs {
				name := q.Name
				if q.Default {
					name += "*"
				}
				parts = append(parts, name+":"+strconv.Itoa(int(q.Priority))+":"+q.MaxTime.String())
			}
			if got := strings.Join(parts, " "); got != tt.want {
				t.Fatalf("queues %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAgePriority(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.rbs")
	os.WriteFile(path, []byte("queue(name = \"a\")\nage_priority(weight = 5, every = \"10s\", max = 50)\n"), 0o644)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.AgeWeight != 5 || c.AgeInterval.String() != "10s" || c.AgeCap != 50 {
		t.Fatalf("age priority %d/%s/%d", c.AgeWeight, c.AgeInterval, c.AgeCap)
	}
}
