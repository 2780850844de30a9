package blobstore

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"sync"

	"github.com/rbs-build/rbs/rbe/digest"
)

// NewResident keeps the small blobs of s in memory as well: blobs of at
// most maxBlob bytes, the most recently used first, up to maxBytes in all.
// A cache hit of a Bazel build reads two such blobs, its action result and
// an output, and a Disk opens, reads and closes a file for each; from
// memory neither costs a system call.
//
// s stays the truth. A blob read from memory is first looked up in s,
// which marks it used there (so that s keeps what is read) and finds it
// gone if s has evicted it. Writes go through to s, and are kept once s
// has stored them. s's FindMissing must be cheap: NewResident is for a
// Disk, whose index is in memory, not for a remote store.
func NewResident(s Store, maxBlob, maxBytes int64) Store {
	r := &resident{Store: s, maxBlob: maxBlob, maxBytes: maxBytes, index: map[digest.Digest]*list.Element{}, lru: list.New()}
	if b, ok := s.(bounded); ok {
		return boundedResident{r, b}
	}
	return r
}

type resident struct {
	Store
	maxBlob, maxBytes int64

	mu    sync.Mutex
	index map[digest.Digest]*list.Element // of *residentBlob
	lru   *list.List                      // most recently used first
	bytes int64
	puts  int64 // Puts begun, so that a read that raced one keeps nothing
}

type residentBlob struct {
	key  digest.Digest
	data []byte
}

// boundedResident passes on the evictions and size of a bounded store, for
// its metrics.
type boundedResident struct {
	*resident
	bounded
}

// Get implements Store.
func (r *resident) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	if data, ok := r.lookup(d); ok {
		missing, err := r.Store.FindMissing(ctx, []digest.Digest{d})
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 {
			r.drop(d)
			return nil, NotFound(d)
		}
		if offset < 0 || offset > int64(len(data)) {
			return nil, badOffset(d, offset, int64(len(data)))
		}
		return io.NopCloser(bytes.NewReader(data[offset:])), nil
	}
	puts := r.putCount()
	rc, err := r.Store.Get(ctx, d, offset)
	if err != nil || offset != 0 {
		return rc, err
	}
	// Read a small blob whole and keep it; a larger one goes on from s.
	head, err := io.ReadAll(io.LimitReader(rc, r.maxBlob+1))
	if err != nil {
		rc.Close()
		return nil, err
	}
	if int64(len(head)) <= r.maxBlob {
		rc.Close()
		r.keep(d, head, puts)
		return io.NopCloser(bytes.NewReader(head)), nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rc), rc}, nil
}

// Put implements Store.
func (r *resident) Put(ctx context.Context, d digest.Digest, src io.Reader) error {
	// In the CAS the key gives the size; in the action cache it does not,
	// and the bytes are recorded until they are too many.
	rec := &recorder{r: src, max: r.maxBlob, data: make([]byte, 0, min(max(d.Size(), 0), r.maxBlob))}
	r.mu.Lock()
	r.dropLocked(d)
	r.puts++
	r.mu.Unlock()
	if err := r.Store.Put(ctx, d, rec); err != nil {
		return err
	}
	if rec.max >= 0 {
		r.keep(d, rec.data, -1)
	}
	return nil
}

// recorder keeps a copy of the bytes read through it, until there are more
// than max; then it keeps none (max becomes -1).
type recorder struct {
	r    io.Reader
	max  int64
	data []byte
}

func (rec *recorder) Read(p []byte) (int, error) {
	n, err := rec.r.Read(p)
	if rec.max >= 0 {
		if int64(len(rec.data)+n) > rec.max {
			rec.max, rec.data = -1, nil
		} else {
			rec.data = append(rec.data, p[:n]...)
		}
	}
	return n, err
}

func (r *resident) lookup(d digest.Digest) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	el, ok := r.index[d]
	if !ok {
		return nil, false
	}
	r.lru.MoveToFront(el)
	return el.Value.(*residentBlob).data, true
}

func (r *resident) putCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.puts
}

// keep holds data as the blob d, dropping the least recently used blobs
// beyond maxBytes. Bytes read from s are kept only when no Put began since
// the read did (puts is the count of Puts then; -1 for a Put's own bytes):
// an action result read just before it was replaced must not outlive its
// replacement.
func (r *resident) keep(d digest.Digest, data []byte, puts int64) {
	if int64(len(data)) > r.maxBytes {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if puts >= 0 && puts != r.puts {
		return
	}
	r.dropLocked(d)
	r.index[d] = r.lru.PushFront(&residentBlob{key: d, data: data})
	r.bytes += int64(len(data))
	for r.bytes > r.maxBytes {
		r.dropLocked(r.lru.Back().Value.(*residentBlob).key)
	}
}

func (r *resident) drop(d digest.Digest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(d)
}

func (r *resident) dropLocked(d digest.Digest) {
	if el, ok := r.index[d]; ok {
		r.lru.Remove(el)
		delete(r.index, d)
		r.bytes -= int64(len(el.Value.(*residentBlob).data))
	}
}
