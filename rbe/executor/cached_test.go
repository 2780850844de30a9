package executor

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Two caches in a row, as --remote_cache composes them: a miss in both
// runs once, below, and the outer cache records the result with every blob
// it names copied from the inner one; the outer cache then serves it
// alone, an output directory too.
func TestCachedInLayers(t *testing.T) {
	inner, outer := newLocal(t), newLocal(t)
	f := newFixture(t, "layered\n")
	newAction := func() *Action {
		a := f.shAction("cat in.txt > out.txt && mkdir -p d/sub && echo n > d/sub/n.txt && printf '#!/bin/sh\\n' > d/x.sh && chmod +x d/x.sh && echo said", "out.txt")
		a.OutputDirs = []string{"d"}
		return a
	}
	layers := Cached(outer.Cache(), Cached(inner.Cache(), inner))
	if res := run(t, layers, newAction(), f.outRoot); res.Cached {
		t.Fatal("the first run was served from a cache")
	}
	root := t.TempDir()
	res := run(t, Cached(outer.Cache(), outer), newAction(), root)
	n, err := os.ReadFile(filepath.Join(root, "d/sub/n.txt"))
	info, serr := os.Stat(filepath.Join(root, "d/x.sh"))
	out, oerr := os.ReadFile(filepath.Join(root, "out.txt"))
	if !res.Cached || string(res.Stdout) != "said\n" || string(n) != "n\n" || err != nil || serr != nil || info.Mode()&0o111 == 0 || string(out) != "layered\n" || oerr != nil {
		t.Fatalf("the outer cache alone: cached %v, stdout %q, n.txt %q (%v), x.sh %v (%v), out.txt %q (%v)", res.Cached, res.Stdout, n, err, info, serr, out, oerr)
	}
}

// spy is a runner that counts its runs and the skip each was asked with.
type spy struct {
	next  runner
	runs  int
	skips int
}

func (s *spy) Run(ctx context.Context, a *Action, outRoot string) (*Result, error) {
	return prepared(ctx, s, a, outRoot)
}

func (s *spy) run(ctx context.Context, a *Action, p *Prepared, outRoot string, skip bool) (*Result, error) {
	s.runs++
	if skip {
		s.skips++
	}
	return s.next.run(ctx, a, p, outRoot, skip)
}

// broken is a Cache whose every entry names a blob that is gone, and
// which counts what it is asked to record.
type broken struct {
	Cache
	recorded int
}

func (b *broken) lookup(context.Context, *Prepared) (*hit, error) {
	return nil, status.Error(codes.NotFound, "a blob of the entry is gone")
}

func (b *broken) record(context.Context, *Prepared, *Result) error {
	b.recorded++
	return nil
}

func (b *broken) open(context.Context, digest.Digest, bool) (io.ReadCloser, error) {
	return nil, status.Error(codes.NotFound, "gone")
}

// What Cached asks of the executor it wraps and of its cache, action by
// action.
func TestCachedAsks(t *testing.T) {
	f := newFixture(t, "asked\n")
	for _, tc := range []struct {
		name                 string
		cache                func(l *Local) Cache
		change               func(*Action)
		runs, skips, records int
		cachedSecond         bool
	}{
		{name: "a hit runs nothing", cache: (*Local).Cache, runs: 1, cachedSecond: true},
		{name: "no cache: never looked up nor recorded", cache: (*Local).Cache, change: func(a *Action) { a.NoCache = true }, runs: 2},
		{name: "a failure is not recorded", cache: (*Local).Cache, change: func(a *Action) { a.Args[2] = "exit 3" }, runs: 2},
		{name: "a broken entry runs again past it", cache: func(*Local) Cache { return &broken{} }, runs: 2, skips: 2, records: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(t)
			c := tc.cache(l)
			s := &spy{next: l}
			e := Cached(c, s)
			var last *Result
			for range 2 {
				a := f.shAction(catScript, "out.txt")
				if tc.change != nil {
					tc.change(a)
				}
				res, err := e.Run(context.Background(), a, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				last = res
			}
			records := 0
			if b, ok := c.(*broken); ok {
				records = b.recorded
			}
			if s.runs != tc.runs || s.skips != tc.skips || records != tc.records || last.Cached != tc.cachedSecond {
				t.Fatalf("runs %d, skips %d, recorded %d, second cached %v; want %d, %d, %d, %v", s.runs, s.skips, records, last.Cached, tc.runs, tc.skips, tc.records, tc.cachedSecond)
			}
		})
	}
}
