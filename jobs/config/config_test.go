package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
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
	os.WriteFile(path, []byte("queue(name = \"a\")\nage_priority(weight = 5, every = \"10s\", max = 50)\nbackfill(lookback = 500)\n"), 0o644)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.AgeWeight != 5 || c.AgeInterval.String() != "10s" || c.AgeCap != 50 {
		t.Fatalf("age priority %d/%s/%d", c.AgeWeight, c.AgeInterval, c.AgeCap)
	}
	if c.Lookback != 500 {
		t.Fatalf("backfill lookback %d, want 500", c.Lookback)
	}
}

// Accounts, fair share and quotas are read, and a bad value is refused
// with a message that names it.
func TestPolicies(t *testing.T) {
	load := func(src string) (*Cluster, error) {
		path := filepath.Join(t.TempDir(), "cluster.rbs")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	c, err := load(`queue(name = "a", quota = {"cpus": 8, "memory": "16G"}, cohort = "c", borrowing_limit = {"cpus": 4}, usage_factor = 2)
queue(name = "b", quota = {"gpus": 2}, cohort = "c")
account(name = "vision", shares = 3, users = ["alice", "bob"])
account(name = "nlp", users = {"carol": 2})
fair_share(weight = 500, half_life = "1d", gpu = 4)`)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Queues[0], c.Queues[1]
	if *a.Quota != (sched.Resources{CPUs: 8, MemoryBytes: 16 << 30, GPUs: -1}) || *a.BorrowingLimit != (sched.Resources{CPUs: 4, MemoryBytes: -1, GPUs: -1}) || a.Cohort != "c" || a.UsageFactor != 2 {
		t.Fatalf("queue a: %+v %+v %+v", a, *a.Quota, *a.BorrowingLimit)
	}
	if *b.Quota != (sched.Resources{CPUs: -1, MemoryBytes: -1, GPUs: 2}) || b.BorrowingLimit != nil {
		t.Fatalf("queue b: %+v", b)
	}
	fs := c.FairShare
	if fs == nil || fs.Weight != 500 || fs.HalfLife != 24*time.Hour || fs.Billing != [3]float64{1, 0.25, 4} || len(fs.Accounts) != 2 ||
		fs.Accounts[0].Shares != 3 || fs.Accounts[0].Users["bob"] != 1 || fs.Accounts[1].Shares != 1 || fs.Accounts[1].Users["carol"] != 2 {
		t.Fatalf("fair share: %+v", fs)
	}
	if c, err := load(`queue(name = "a")`); err != nil || c.FairShare != nil {
		t.Fatalf("without accounts: %+v, %v", c, err)
	}
	for _, tt := range []struct{ src, err string }{
		{`queue(name = "a", quota = {"disks": 1})`, `queue "a": quota: "disks": want cpus, memory or gpus`},
		{`queue(name = "a", quota = {"cpus": -1})`, `queue "a": quota: cpus -1: want a count, 0 or more`},
		{`queue(name = "a", quota = {"memory": "lots"})`, `queue "a": quota: memory: invalid size "lots"`},
		{`queue(name = "a", cohort = "c")`, `queue "a": cohort "c": a queue in a cohort lends and borrows quota, and needs a quota`},
		{`queue(name = "a", quota = {"cpus": 1}, borrowing_limit = {"cpus": 1})`, `queue "a": borrowing_limit: a queue borrows from its cohort, and needs one`},
		{`queue(name = "a", usage_factor = -1)`, `queue "a": usage_factor -1: want a number, 0 or more`},
		{"queue(name = \"a\")\naccount(name = \"x\", shares = 0)", `account "x": shares 0: want 1 or more`},
		{"queue(name = \"a\")\naccount(name = \"x\", users = [\"u\"])\naccount(name = \"y\", users = [\"u\"])", `account "y": user "u" is already in account "x"`},
		{"queue(name = \"a\")\naccount(name = \"x\")\naccount(name = \"x\")", `account "x" is declared twice`},
		{"queue(name = \"a\")\naccount(name = \"x\", users = {\"u\": 0})", `account "x": user "u": shares 0: want 1 or more`},
		{"queue(name = \"a\")\nfair_share(half_life = \"soon\")", `fair_share: half_life "soon": want a duration such as 7d`},
		{"queue(name = \"a\")\nfair_share(gpu = -2)", `fair_share: gpu -2: want a number, 0 or more`},
		{"queue(name = \"a\")\nbackfill(lookback = 0)", `backfill: lookback 0: want 1 or more`},
	} {
		if _, err := load(tt.src); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want %q", tt.src, err, tt.err)
		}
	}
}
