package blobstore

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rbs-build/rbs/rbe/digest"
)

// The metrics count what passes through an instrumented store: bytes read
// and stored (not those of a refused write), lookups and hits by Get and
// FindMissing, and a disk store's evictions and size, each store apart.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	disk, err := NewDisk(t.TempDir(), 25)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	cas := ContentAddressed(m.Instrument("cas", disk))
	ac := m.Instrument("ac", NewMemory())

	blobs := []string{"0123456789", "abcdefghij", "ABCDEFGHIJ"}
	for _, b := range blobs {
		if err := PutBytes(ctx, cas, digest.FromBytes([]byte(b)), []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := PutBytes(ctx, cas, digest.FromBytes([]byte("right")), []byte("wrong")); err == nil {
		t.Fatal("a corrupt write was stored")
	}
	// The first blob was evicted to keep the store within 25 bytes.
	last := digest.FromBytes([]byte(blobs[2]))
	rc, err := cas.Get(ctx, last, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := cas.Get(ctx, digest.FromBytes([]byte(blobs[0])), 0); !IsNotFound(err) {
		t.Fatalf("Get of the evicted blob: %v, want NotFound", err)
	}
	missing, err := cas.FindMissing(ctx, []digest.Digest{last, digest.FromBytes([]byte(blobs[1])), digest.FromBytes([]byte(blobs[0])), digest.Empty})
	if err != nil || len(missing) != 1 {
		t.Fatalf("FindMissing: %v, %v; want the evicted blob", missing, err)
	}
	if err := PutBytes(ctx, ac, digest.FromBytes([]byte("action")), []byte("result")); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP rbs_blobstore_evictions_total Blobs evicted to keep the store within its bound or to make room on a full disk.
# TYPE rbs_blobstore_evictions_total counter
rbs_blobstore_evictions_total{store="cas"} 1
# HELP rbs_blobstore_hits_total Lookups that found their blob.
# TYPE rbs_blobstore_hits_total counter
rbs_blobstore_hits_total{store="ac"} 0
rbs_blobstore_hits_total{store="cas"} 3
# HELP rbs_blobstore_lookups_total Blobs looked up: each Get, and each digest an existence check (FindMissing) asks about.
# TYPE rbs_blobstore_lookups_total counter
rbs_blobstore_lookups_total{store="ac"} 0
rbs_blobstore_lookups_total{store="cas"} 5
# HELP rbs_blobstore_read_bytes_total Bytes read from the store's blobs.
# TYPE rbs_blobstore_read_bytes_total counter
rbs_blobstore_read_bytes_total{store="ac"} 0
rbs_blobstore_read_bytes_total{store="cas"} 6
# HELP rbs_blobstore_size_bytes Bytes the store holds.
# TYPE rbs_blobstore_size_bytes gauge
rbs_blobstore_size_bytes{store="cas"} 20
# HELP rbs_blobstore_written_bytes_total Bytes of blobs stored.
# TYPE rbs_blobstore_written_bytes_total counter
rbs_blobstore_written_bytes_total{store="ac"} 6
rbs_blobstore_written_bytes_total{store="cas"} 30
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
