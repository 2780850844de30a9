package scheduler

import (
	"fmt"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
)

func TestRecentKeepsTheLatestFirst(t *testing.T) {
	for _, n := range []int{0, 1, 5, recentActions, recentActions + 7, 3*recentActions + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var r recent
			for i := 0; i < n; i++ {
				r.add(&workerpb.ActionRecord{Digest: fmt.Sprint(i)})
			}
			got := r.latest()
			if want := min(n, recentActions); len(got) != want {
				t.Fatalf("kept %d, want %d", len(got), want)
			}
			for i, a := range got {
				if want := fmt.Sprint(n - 1 - i); a.Digest != want {
					t.Fatalf("entry %d is action %s, want %s", i, a.Digest, want)
				}
			}
		})
	}
}
