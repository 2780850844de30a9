package blobstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"

	"github.com/rbs-build/rbs/rbe/digest"
	"golang.org/x/sync/errgroup"
)

// ShardBackend is one backend of a Shard.
type ShardBackend struct {
	// Name identifies the backend in the hash: keys stay where they are
	// as long as the names do, whatever the order of the backends.
	Name string
	// Weight is the backend's share of the keys relative to the others',
	// at least 1.
	Weight int
	Store  Store
}

// Shard spreads blobs over backends by weighted rendezvous hashing (highest
// random weight): each key goes to the backend whose score for it, a hash
// of the backend's name and the key scaled by the backend's weight, is
// highest. A backend gets keys in proportion to its weight, and adding or
// removing one moves only the keys it takes or held. FindMissing asks each
// backend about its own keys, at once, and returns the union of their
// answers, which is exact when theirs are.
type Shard struct {
	backends []shardBackend
}

type shardBackend struct {
	seed   uint64
	weight float64
	store  Store
}

var _ Store = (*Shard)(nil)

// NewShard returns a Shard over backends, which must have distinct names
// and positive weights.
func NewShard(backends []ShardBackend) (*Shard, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("shard: no backends")
	}
	s := &Shard{}
	names := map[string]bool{}
	for _, b := range backends {
		if b.Weight < 1 {
			return nil, fmt.Errorf("shard: backend %s has weight %d, want 1 or more", b.Name, b.Weight)
		}
		if names[b.Name] {
			return nil, fmt.Errorf("shard: backend %s given twice", b.Name)
		}
		names[b.Name] = true
		h := fnv.New64a()
		io.WriteString(h, b.Name)
		s.backends = append(s.backends, shardBackend{seed: h.Sum64(), weight: float64(b.Weight), store: b.Store})
	}
	return s, nil
}

// pick returns the index of the backend that holds d.
func (s *Shard) pick(d digest.Digest) int {
	h := fnv.New64a()
	io.WriteString(h, d.Hash())
	io.WriteString(h, strconv.FormatInt(d.Size(), 10))
	key := h.Sum64()
	best, bestScore := 0, math.Inf(-1)
	for i, b := range s.backends {
		// A uniform u in (0, 1) from the mixed hash; -w/ln(u) is the
		// weighted rendezvous score.
		u := (float64(mix(key^b.seed)>>11) + 0.5) / (1 << 53)
		if score := -b.weight / math.Log(u); score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// mix is SplitMix64's finalizer, spreading every input bit over the output.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Get implements Store.
func (s *Shard) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	return s.backends[s.pick(d)].store.Get(ctx, d, offset)
}

// Put implements Store.
func (s *Shard) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	return s.backends[s.pick(d)].store.Put(ctx, d, r)
}

// FindMissing implements Store.
func (s *Shard) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	parts := make([][]digest.Digest, len(s.backends))
	for _, d := range ds {
		i := s.pick(d)
		parts[i] = append(parts[i], d)
	}
	missing := make([][]digest.Digest, len(s.backends))
	g, gctx := errgroup.WithContext(ctx)
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		g.Go(func() error {
			m, err := s.backends[i].store.FindMissing(gctx, part)
			missing[i] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []digest.Digest
	for _, m := range missing {
		out = append(out, m...)
	}
	return out, nil
}
