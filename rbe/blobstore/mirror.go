package blobstore

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/rbs-build/rbs/rbe/digest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// repairs bounds the copies one FindMissing makes at once.
const repairs = 8

// Mirror keeps every blob on two backends, and repairs a blob that one of
// them lacks when a read or an existence check comes across it. A side is
// unavailable when it answers codes.Unavailable (an unreachable server, a
// switched-off backend); every other error is an answer. Precisely:
//
//   - Put writes both sides at once, from one pass over the reader. It
//     succeeds when both sides stored the blob, or when one did and the
//     other is unavailable (the mirror is degraded until a later Get or
//     FindMissing repairs the blob). Any other failure of either side is
//     Put's error, a failed read of the reader included, on which neither
//     side keeps the blob.
//   - Get reads from one side, alternating between them to share the load.
//     When that side lacks the blob or is unavailable, it reads the other.
//     When the first side lacked it and the other has it, Get first copies
//     the whole blob to the first side, then returns the read: after a Get
//     that found a blob, the side it asked first has it too. A failed copy
//     does not fail the read. A blob absent from one side and the other
//     unavailable is NotFound, so clients upload it again to the side that
//     is up; only both sides unavailable is Unavailable.
//   - FindMissing asks both sides at once. A blob is missing when both lack
//     it; one that only one side lacks is copied to it (at most repairs
//     copies at once) before FindMissing returns, and is not missing. A
//     failed copy is not an error: the blob is still on the other side.
//     With one side unavailable, the other's answer is the answer.
type Mirror struct {
	a, b Store
	next atomic.Uint32
}

var _ Store = (*Mirror)(nil)

// NewMirror returns a Mirror of a and b.
func NewMirror(a, b Store) *Mirror { return &Mirror{a: a, b: b} }

// unavailable reports whether err says a backend cannot be reached now.
func unavailable(err error) bool { return status.Code(err) == codes.Unavailable }

// absentOrDown reports whether err is a backend lacking a blob or being
// unreachable: the answers Mirror reads the other side after.
func absentOrDown(err error) bool { return IsNotFound(err) || unavailable(err) }

// Get implements Store.
func (m *Mirror) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	first, second := m.a, m.b
	if m.next.Add(1)%2 == 0 {
		first, second = second, first
	}
	rc, err1 := first.Get(ctx, d, offset)
	if err1 == nil || !absentOrDown(err1) {
		return rc, err1
	}
	rc, err2 := second.Get(ctx, d, offset)
	switch {
	case err2 == nil && IsNotFound(err1):
		rc.Close()
		_ = copyBlob(ctx, second, first, d)
		return second.Get(ctx, d, offset)
	case err2 == nil || !absentOrDown(err2):
		return rc, err2
	case IsNotFound(err1):
		return nil, err1
	}
	return nil, err2
}

// copyBlob copies the blob d from one store to another.
func copyBlob(ctx context.Context, from, to Store, d digest.Digest) error {
	rc, err := from.Get(ctx, d, 0)
	if err != nil {
		return err
	}
	defer rc.Close()
	return to.Put(ctx, d, rc)
}

// errSideDone ends the writes to a side whose Put has returned.
var errSideDone = errors.New("the mirror side's write has ended")

// Put implements Store.
func (m *Mirror) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	sides := []Store{m.a, m.b}
	errs := make([]error, len(sides))
	writers := make([]*io.PipeWriter, len(sides))
	var wg sync.WaitGroup
	for i, s := range sides {
		pr, pw := io.Pipe()
		writers[i] = pw
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Put(ctx, d, pr)
			pr.CloseWithError(errSideDone)
		}()
	}
	rerr := fanOut(r, writers)
	wg.Wait()
	if rerr != nil {
		return rerr
	}
	errA, errB := errs[0], errs[1]
	if (errA == nil || errB == nil) && (errA == nil || unavailable(errA)) && (errB == nil || unavailable(errB)) {
		return nil // on both sides, or on one with the other unavailable
	}
	if errA != nil && !unavailable(errA) {
		return errA
	}
	if errB != nil && !unavailable(errB) {
		return errB
	}
	return errA // both unavailable
}

// fanOut copies r into every writer, dropping those that fail (their side's
// Put has returned), until r ends or no writer is left; then it closes the
// writers: normally at EOF, with r's error otherwise, which it returns.
func fanOut(r io.Reader, ws []*io.PipeWriter) error {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	live := append([]*io.PipeWriter(nil), ws...)
	for len(live) > 0 {
		n, err := r.Read(*buf)
		if n > 0 {
			kept := live[:0]
			for _, w := range live {
				if _, werr := w.Write((*buf)[:n]); werr == nil {
					kept = append(kept, w)
				}
			}
			live = kept
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			for _, w := range ws {
				w.CloseWithError(err)
			}
			return err
		}
	}
	for _, w := range ws {
		w.Close()
	}
	return nil
}

// FindMissing implements Store.
func (m *Mirror) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	var missA, missB []digest.Digest
	var errA, errB error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); missA, errA = m.a.FindMissing(ctx, ds) }()
	go func() { defer wg.Done(); missB, errB = m.b.FindMissing(ctx, ds) }()
	wg.Wait()
	switch {
	case errA != nil && errB != nil:
		if unavailable(errA) {
			return nil, errB
		}
		return nil, errA
	case errA != nil:
		if unavailable(errA) {
			return missB, nil
		}
		return nil, errA
	case errB != nil:
		if unavailable(errB) {
			return missA, nil
		}
		return nil, errB
	}
	inA, inB := digestSet(missA), digestSet(missB)
	var missing []digest.Digest
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(repairs)
	repaired := map[digest.Digest]bool{}
	repair := func(from, to Store, d digest.Digest) {
		if repaired[d] {
			return // asked about more than once
		}
		repaired[d] = true
		g.Go(func() error {
			_ = copyBlob(gctx, from, to, d)
			return nil
		})
	}
	for _, d := range missA {
		if inB[d] {
			missing = append(missing, d)
		} else {
			repair(m.b, m.a, d)
		}
	}
	for _, d := range missB {
		if !inA[d] {
			repair(m.a, m.b, d)
		}
	}
	g.Wait()
	return missing, nil
}

func digestSet(ds []digest.Digest) map[digest.Digest]bool {
	set := make(map[digest.Digest]bool, len(ds))
	for _, d := range ds {
		set[d] = true
	}
	return set
}
