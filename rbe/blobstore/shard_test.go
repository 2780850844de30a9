package blobstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
)

func keys(n int) []digest.Digest {
	ds := make([]digest.Digest, n)
	for i := range ds {
		ds[i] = digest.FromBytes([]byte(fmt.Sprintf("blob %d", i)))
	}
	return ds
}

func newShard(t *testing.T, weights ...int) (*Shard, []*Memory) {
	t.Helper()
	var backends []ShardBackend
	var mems []*Memory
	for i, w := range weights {
		m := NewMemory()
		mems = append(mems, m)
		backends = append(backends, ShardBackend{Name: fmt.Sprintf("disk:/b%d", i), Weight: w, Store: m})
	}
	s, err := NewShard(backends)
	if err != nil {
		t.Fatal(err)
	}
	return s, mems
}

// Blobs put through a shard land on the backends in proportion to their
// weights, each within 20% of its share.
func TestShardSpreadsByWeight(t *testing.T) {
	ctx := context.Background()
	for _, weights := range [][]int{{1, 1, 1}, {2, 1}, {1, 3}, {1, 2, 5}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			s, mems := newShard(t, weights...)
			const n = 3000
			for i := range n {
				b := []byte(fmt.Sprintf("blob %d", i))
				if err := PutBytes(ctx, s, digest.FromBytes(b), b); err != nil {
					t.Fatal(err)
				}
			}
			total := 0
			for _, w := range weights {
				total += w
			}
			for i, m := range mems {
				want := float64(n*weights[i]) / float64(total)
				if got := float64(len(m.blobs)); got < 0.8*want || got > 1.2*want {
					t.Errorf("backend %d (weight %d) holds %.0f blobs, want %.0f ± 20%%", i, weights[i], got, want)
				}
			}
		})
	}
}

// Adding a backend to n moves about 1/(n+1) of the keys, every one of them
// to the new backend; removing it moves them back.
func TestShardAddingABackendMovesItsShare(t *testing.T) {
	three, _ := newShard(t, 1, 1, 1)
	four, _ := newShard(t, 1, 1, 1, 1)
	ds := keys(4000)
	moved := 0
	for _, d := range ds {
		before, after := three.pick(d), four.pick(d)
		if before != after {
			moved++
			if after != 3 {
				t.Fatalf("%s moved from backend %d to %d, not to the new one", d, before, after)
			}
		}
	}
	if frac := float64(moved) / float64(len(ds)); frac < 0.2 || frac > 0.3 {
		t.Errorf("adding a fourth backend moved %.2f of the keys, want about 0.25", frac)
	}
}

// Where a key goes depends on the backends' names, not their order.
func TestShardIgnoresOrder(t *testing.T) {
	a, b := NewMemory(), NewMemory()
	s1, _ := NewShard([]ShardBackend{{"x", 1, a}, {"y", 2, b}})
	s2, _ := NewShard([]ShardBackend{{"y", 2, b}, {"x", 1, a}})
	for _, d := range keys(500) {
		if s1.backends[s1.pick(d)].store != s2.backends[s2.pick(d)].store {
			t.Fatalf("%s goes to another backend when the order changes", d)
		}
	}
}

// FindMissing answers exactly which blobs no backend holds.
func TestShardFindMissingIsExact(t *testing.T) {
	ctx := context.Background()
	s, _ := newShard(t, 1, 2, 1)
	ds := keys(600)
	want := map[digest.Digest]bool{}
	for i, d := range ds {
		if i%3 == 0 {
			want[d] = true
			continue
		}
		if err := PutBytes(ctx, s, d, []byte(fmt.Sprintf("blob %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	missing, err := s.FindMissing(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != len(want) {
		t.Fatalf("FindMissing returned %d blobs, want %d", len(missing), len(want))
	}
	for _, d := range missing {
		if !want[d] {
			t.Fatalf("FindMissing says %s is missing; it is stored", d)
		}
	}
	for i, d := range ds[1:3] {
		got, err := GetBytes(ctx, s, d)
		if err != nil || string(got) != fmt.Sprintf("blob %d", i+1) {
			t.Fatalf("Get %s = %q, %v", d, got, err)
		}
	}
}

func TestNewShardRejects(t *testing.T) {
	m := NewMemory()
	for _, tc := range []struct {
		name     string
		backends []ShardBackend
	}{
		{"none", nil},
		{"zero weight", []ShardBackend{{"a", 0, m}, {"b", 1, m}}},
		{"same name", []ShardBackend{{"a", 1, m}, {"a", 1, m}}},
	} {
		if _, err := NewShard(tc.backends); err == nil {
			t.Errorf("%s: NewShard succeeded", tc.name)
		}
	}
}
