package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/server"
)

func startCAS(t *testing.T) (*client.CAS, blobstore.Store) {
	t.Helper()
	store := blobstore.ContentAddressed(blobstore.NewMemory())
	srv := server.New(server.Config{CAS: store, AC: blobstore.NewMemory()})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := client.Dial(client.Options{Target: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return client.NewCAS(conn, ""), store
}

func blobOf(data []byte, open bool) client.Blob {
	b := client.Blob{Digest: digest.FromBytes(data)}
	if open {
		b.Open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	} else {
		b.Data = data
	}
	return b
}

// Upload says which blobs it is about to send before it sends any, and
// reports the bytes it sends as batches and streams go out, adding up to
// the size it returns.
func TestUploadReportsProgress(t *testing.T) {
	cas, store := startCAS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	present := blobOf([]byte("already there"), false)
	if _, _, err := cas.Upload(ctx, []client.Blob{present}); err != nil {
		t.Fatal(err)
	}
	blobs := []client.Blob{present, present}
	want := map[digest.Digest]bool{}
	var wantBytes int64
	add := func(b client.Blob) {
		blobs = append(blobs, b)
		want[b.Digest] = true
		wantBytes += b.Digest.Size()
	}
	for i := 0; i < 8; i++ { // more than one batch's worth of small blobs
		add(blobOf(bytes.Repeat([]byte{byte('a' + i)}, client.BatchLimit-i), i%2 == 0))
	}
	add(blobOf(bytes.Repeat([]byte("large "), 500_000), true)) // several ByteStream chunks
	blobs = append(blobs, blobOf([]byte{}, false))             // every server has the empty blob
	add(blobOf([]byte("small"), false))
	blobs = append(blobs, blobs[len(blobs)-1])

	var missing []digest.Digest
	missingCalls := 0
	var amounts []int64
	var progressed int64
	sent, size, err := cas.Upload(ctx, blobs,
		client.OnMissing(func(ds []digest.Digest) {
			missingCalls++
			if len(amounts) > 0 {
				t.Errorf("OnMissing called after %d progress reports", len(amounts))
			}
			missing = ds
		}),
		client.OnProgress(func(n int64) {
			if missingCalls == 0 {
				t.Error("progress reported before OnMissing")
			}
			if n <= 0 {
				t.Errorf("progress of %d bytes", n)
			}
			amounts = append(amounts, n)
			progressed += n
		}))
	if err != nil {
		t.Fatal(err)
	}
	if missingCalls != 1 || len(missing) != len(want) {
		t.Fatalf("OnMissing called %d times with %d digests; want once with %d", missingCalls, len(missing), len(want))
	}
	for _, d := range missing {
		if !want[d] {
			t.Errorf("OnMissing named %s, which the server had or nobody asked to send", d)
		}
	}
	if sent != len(want) || size != wantBytes || progressed != wantBytes {
		t.Fatalf("sent %d blobs, %d bytes, progress added up to %d; want %d blobs, %d bytes both", sent, size, progressed, len(want), wantBytes)
	}
	if len(amounts) < 4 {
		t.Fatalf("progress came in %d reports (%v); want one per batch and per streamed chunk", len(amounts), amounts)
	}
	var ds []digest.Digest
	for d := range want {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Hash() < ds[j].Hash() })
	if gone, err := store.FindMissing(ctx, ds); err != nil || len(gone) != 0 {
		t.Fatalf("after the upload the server lacks %v (%v)", gone, err)
	}

	// Nothing left to send: an empty list, and no progress.
	missingCalls, amounts = 0, nil
	sent, size, err = cas.Upload(ctx, blobs,
		client.OnMissing(func(ds []digest.Digest) { missingCalls++; missing = ds }),
		client.OnProgress(func(n int64) { amounts = append(amounts, n) }))
	if err != nil || sent != 0 || size != 0 || missingCalls != 1 || len(missing) != 0 || len(amounts) != 0 {
		t.Fatalf("uploading again: sent %d, %d bytes, %v; OnMissing %d times with %v; progress %v", sent, size, err, missingCalls, missing, amounts)
	}
}

// ReadOffset reads a blob from any offset in it; a read from the start is
// verified against the digest.
func TestReadOffset(t *testing.T) {
	cas, store := startCAS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := bytes.Repeat([]byte("0123456789"), 250_000) // several chunks
	d := digest.FromBytes(data)
	if err := blobstore.PutBytes(ctx, store, d, data); err != nil {
		t.Fatal(err)
	}
	for _, offset := range []int64{0, 1, 1 << 20, d.Size() - 1, d.Size()} {
		var buf bytes.Buffer
		if err := cas.ReadOffset(ctx, d, offset, &buf); err != nil || !bytes.Equal(buf.Bytes(), data[offset:]) {
			t.Fatalf("ReadOffset %d: %d bytes, %v; want %d", offset, buf.Len(), err, d.Size()-offset)
		}
	}
	if err := cas.ReadOffset(ctx, d, d.Size()+1, io.Discard); err == nil {
		t.Fatal("ReadOffset past the end succeeded")
	}
	if err := cas.ReadOffset(ctx, digest.FromBytes([]byte("absent")), 0, io.Discard); !blobstore.IsNotFound(err) {
		t.Fatalf("ReadOffset of an absent blob: %v, want NotFound", err)
	}
}
