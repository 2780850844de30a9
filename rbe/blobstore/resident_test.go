package blobstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// countingStore counts the Gets that reach its Memory, and can hold them
// at a gate.
type countingStore struct {
	*blobstore.Memory
	mu   sync.Mutex
	gets int
	// When set, a Get says it has reached the store on reached, and then
	// waits for release.
	reached, release chan struct{}
}

func (c *countingStore) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	c.mu.Lock()
	c.gets++
	reached, release := c.reached, c.release
	c.reached, c.release = nil, nil
	c.mu.Unlock()
	rc, err := c.Memory.Get(ctx, d, offset)
	if reached != nil {
		close(reached)
		<-release
	}
	return rc, err
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets
}

func blob(s string) (digest.Digest, []byte) { return digest.FromBytes([]byte(s)), []byte(s) }

func TestResident(t *testing.T) {
	ctx := context.Background()
	small, smallData := blob("0123456789")
	other, otherData := blob("abcdefghij")
	third, thirdData := blob("ABCDEFGHIJ")
	large, largeData := blob(strings.Repeat("x", 100))
	for _, c := range []struct {
		name string
		// run acts on the resident store r over base and returns what the
		// last read gave and how many Gets should have reached base.
		run       func(t *testing.T, r blobstore.Store, base *countingStore) (got string, err error, wantGets int)
		want      string
		wantError codes.Code
	}{
		{"a blob put is read from memory", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, smallData)
			got, err := read(t, r, small, 0)
			return got, err, 0
		}, "0123456789", codes.OK},
		{"a blob read once is read from memory after", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, base, small, smallData)
			read(t, r, small, 0)
			got, err := read(t, r, small, 0)
			return got, err, 1
		}, "0123456789", codes.OK},
		{"a read from an offset, from memory", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, smallData)
			got, err := read(t, r, small, 4)
			return got, err, 0
		}, "456789", codes.OK},
		{"an offset past the end, from memory", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, smallData)
			got, err := read(t, r, small, 11)
			return got, err, 0
		}, "", codes.OutOfRange},
		{"a large blob is always read from the store, whole", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, large, largeData)
			read(t, r, large, 0)
			got, err := read(t, r, large, 0)
			return got, err, 2
		}, strings.Repeat("x", 100), codes.OK},
		{"a blob the store evicted is gone", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, smallData)
			base.Delete(small)
			got, err := read(t, r, small, 0)
			return got, err, 0
		}, "", codes.NotFound},
		{"beyond the bound, the least recently used blob is dropped", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, smallData)
			blobstore.PutBytes(ctx, r, other, otherData)
			read(t, r, small, 0) // other is now the least recently used
			blobstore.PutBytes(ctx, r, third, thirdData)
			read(t, r, small, 0)
			read(t, r, third, 0)
			got, err := read(t, r, other, 0)
			return got, err, 1
		}, "abcdefghij", codes.OK},
		{"a failed put keeps nothing", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			if err := r.Put(ctx, small, io.MultiReader(strings.NewReader("01234"), errReader{})); err == nil {
				t.Fatal("a put whose reader failed succeeded")
			}
			got, err := read(t, r, small, 0)
			return got, err, 1
		}, "", codes.NotFound},
		{"a key put again reads as its last put", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, r, small, []byte("first"))
			blobstore.PutBytes(ctx, r, small, []byte("second"))
			got, err := read(t, r, small, 0)
			return got, err, 0
		}, "second", codes.OK},
		{"a read that raced a put keeps nothing", func(t *testing.T, r blobstore.Store, base *countingStore) (string, error, int) {
			blobstore.PutBytes(ctx, base, small, []byte("old"))
			reached, release := make(chan struct{}), make(chan struct{})
			base.mu.Lock()
			base.reached, base.release = reached, release
			base.mu.Unlock()
			done := make(chan string)
			go func() {
				got, _ := read(t, r, small, 0)
				done <- got
			}()
			// The read took its count of puts before it reached the store.
			<-reached
			blobstore.PutBytes(ctx, r, small, []byte("new"))
			close(release)
			if old := <-done; old != "old" {
				t.Fatalf("the racing read gave %q", old)
			}
			got, err := read(t, r, small, 0)
			return got, err, 1
		}, "new", codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := &countingStore{Memory: blobstore.NewMemory()}
			r := blobstore.NewResident(base, 16, 25) // blobs of 10 bytes: two fit
			before := base.count()
			got, err, wantGets := c.run(t, r, base)
			if code := status.Code(err); code != c.wantError {
				t.Fatalf("error %v, want code %v", err, c.wantError)
			}
			if got != c.want {
				t.Fatalf("read %q, want %q", got, c.want)
			}
			if gets := base.count() - before; gets != wantGets {
				t.Fatalf("%d reads reached the store, want %d", gets, wantGets)
			}
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("broken") }

// TestResidentKeepsDiskBounded: over a Disk, the resident store still
// reports the Disk's size and evictions for its metrics, and a blob the
// Disk evicted to stay in its bound is not served from memory.
func TestResidentKeepsDiskBounded(t *testing.T) {
	ctx := context.Background()
	disk, err := blobstore.NewDisk(t.TempDir(), 25)
	if err != nil {
		t.Fatal(err)
	}
	r := blobstore.NewResident(disk, 16, 1<<20)
	b, ok := r.(interface {
		Evictions() int64
		Size() int64
	})
	if !ok {
		t.Fatal("a resident Disk does not report its size and evictions")
	}
	first, firstData := blob("0123456789")
	for _, s := range []string{"0123456789", "abcdefghij", "ABCDEFGHIJ"} {
		d, data := blob(s)
		if err := r.Put(ctx, d, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if b.Evictions() != 1 || b.Size() != 20 {
		t.Fatalf("evictions %d, size %d; want 1 and 20", b.Evictions(), b.Size())
	}
	if _, err := read(t, r, first, 0); status.Code(err) != codes.NotFound {
		t.Fatalf("the evicted blob %q read with error %v, want NotFound", firstData, err)
	}
}
