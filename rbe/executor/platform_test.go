package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/rbs-build/rbs/rbe/platform"
)

// An action for another platform than this machine's is refused before it
// runs, unless its result is cached; one for this machine's runs.
func TestLocalRunsOnlyItsPlatform(t *testing.T) {
	other, _ := platform.Parse("linux-arm64")
	if platform.Host() == other {
		other, _ = platform.Parse("linux-x86_64")
	}
	l, err := NewLocal(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		target platform.Platform
		want   bool // runs
	}{
		{"no platform", platform.Platform{}, true},
		{"this machine's", platform.Host(), true},
		{"another", other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "input\n")
			a := f.shAction("cat in.txt > out.txt", "out.txt")
			if !tc.target.IsZero() {
				a.Platform = tc.target.Properties()
			}
			res, err := Cached(l.Cache(), l).Run(context.Background(), a, f.outRoot)
			var pe *PlatformError
			switch {
			case tc.want && (err != nil || res.ExitCode != 0 || f.read("out.txt") != "input\n"):
				t.Fatalf("ran: %v, %+v", err, res)
			case !tc.want && (!errors.As(err, &pe) || pe.Want != other || pe.Host != platform.Host()):
				t.Fatalf("an action for %s: %v; want a PlatformError", other, err)
			}
		})
	}
}
