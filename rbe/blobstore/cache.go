package blobstore

import (
	"context"
	"errors"
	"io"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cache is a local store, a size-bounded Disk in practice, in front of a
// remote one that every server shares and that is the truth:
//
//   - Get reads the local copy when there is one. Otherwise it reads the
//     remote and, for a read from the start, fills the local store with
//     the bytes as the caller reads them, streaming: the blob is stored
//     locally once the caller has read it to the end (the read's EOF
//     comes after the local copy is in place), and not at all when the
//     caller stops early or the remote read fails. A read from an offset
//     that misses locally is served by the remote alone.
//   - Put writes the remote and, from the same pass over the reader, the
//     local store. The local copy is kept only when the remote stored the
//     blob; a local failure (a blob over the Disk's bound, a full disk) is
//     not Put's error.
//   - FindMissing asks the remote only, so that it stays exact for every
//     server sharing it: a blob cached here but gone from the remote is
//     missing.
type Cache struct {
	local, remote Store
}

var _ Store = (*Cache)(nil)

// NewCache returns remote behind local as a read-through cache.
func NewCache(local, remote Store) *Cache { return &Cache{local: local, remote: remote} }

// errFillEnded ends the writes to a local copy whose Put has returned.
var errFillEnded = errors.New("the local copy's write has ended")

// errAbandoned discards a local copy whose read the caller closed early.
var errAbandoned = errors.New("the read was closed before its end")

// Get implements Store.
func (c *Cache) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	rc, err := c.local.Get(ctx, d, offset)
	if err == nil || status.Code(err) == codes.OutOfRange {
		return rc, err
	}
	// Absent here, or unreadable here: the remote has the answer.
	rc, err = c.remote.Get(ctx, d, offset)
	if err != nil || offset != 0 {
		return rc, err
	}
	pr, pw := io.Pipe()
	f := &filling{src: rc, local: pw, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		c.local.Put(ctx, d, pr)
		pr.CloseWithError(errFillEnded)
	}()
	return f, nil
}

// filling is a remote read that copies what the caller reads into a local
// Put.
type filling struct {
	src   io.ReadCloser
	local *io.PipeWriter
	done  chan struct{} // closed when the local Put has returned
	// dropped: the local Put has stopped reading; ended: local was closed.
	dropped, ended bool
}

func (f *filling) Read(p []byte) (int, error) {
	n, err := f.src.Read(p)
	if n > 0 && !f.dropped {
		if _, werr := f.local.Write(p[:n]); werr != nil {
			f.dropped = true
		}
	}
	switch {
	case err == io.EOF:
		f.end(nil)
	case err != nil:
		f.end(err)
	}
	return n, err
}

// end ends the local Put, committing it when err is nil, and waits for it.
func (f *filling) end(err error) {
	if f.ended {
		return
	}
	f.ended = true
	f.local.CloseWithError(err)
	<-f.done
}

func (f *filling) Close() error {
	f.end(errAbandoned)
	return f.src.Close()
}

// Put implements Store.
func (c *Cache) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.local.Put(ctx, d, pr)
		pr.CloseWithError(errFillEnded)
	}()
	t := &teeing{r: r, w: pw}
	err := c.remote.Put(ctx, d, t)
	keep := err // nil commits the local copy
	if err == nil && !t.eof && !t.dropped {
		// The remote had the blob and stopped reading early: the rest of
		// it still goes to the local copy.
		_, keep = io.Copy(io.Discard, t)
	}
	pw.CloseWithError(keep)
	<-done
	return err
}

// teeing copies what is read from r into w until w fails, without closing
// it.
type teeing struct {
	r            io.Reader
	w            *io.PipeWriter
	eof, dropped bool
}

func (t *teeing) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && !t.dropped {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.dropped = true
		}
	}
	if err == io.EOF {
		t.eof = true
	}
	return n, err
}

// FindMissing implements Store.
func (c *Cache) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	return c.remote.FindMissing(ctx, ds)
}
