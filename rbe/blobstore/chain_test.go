package blobstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Each combinator, built from its spec, keeps the Store contract.
func TestOpenChains(t *testing.T) {
	ctx := context.Background()
	// Made here: a subtest's TempDir has its name, parentheses and all.
	dir := t.TempDir()
	for i, tc := range []struct {
		spec string
		want string // the type Open builds
	}{
		{"disk:T/a", "*blobstore.Disk"},
		{"shard(disk:T/a,2*disk:T/b?max_size=1MiB)", "*blobstore.Shard"},
		{"mirror(disk:T/a,shard(disk:T/b,disk:T/c))", "*blobstore.Mirror"},
		{"cache(disk:T/a?max_size=1KiB,mirror(disk:T/b,disk:T/c))", "*blobstore.Cache"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			spec, err := Parse(strings.ReplaceAll(tc.spec, "T/", fmt.Sprintf("%s/%d-", dir, i)))
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(ctx, spec, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", s); got != tc.want {
				t.Fatalf("Open built a %s, want a %s", got, tc.want)
			}
			var ds []digest.Digest
			for i := range 50 {
				d, b := blob(fmt.Sprintf("blob %d", i))
				ds = append(ds, d)
				if i%2 == 0 {
					if err := PutBytes(ctx, s, d, b); err != nil {
						t.Fatal(err)
					}
				}
			}
			missing, err := s.FindMissing(ctx, ds)
			if err != nil || len(missing) != 25 {
				t.Fatalf("FindMissing = %d blobs, %v; want 25", len(missing), err)
			}
			for i, d := range ds {
				_, err := GetBytes(ctx, s, d)
				if (i%2 == 0) != (err == nil) {
					t.Fatalf("Get blob %d: %v", i, err)
				}
			}
		})
	}
}

// A disk spec without max_size takes Options.DiskMaxSize; max_size=0 has
// no bound.
func TestOpenDiskBound(t *testing.T) {
	ctx := context.Background()
	d, b := blob("twenty bytes of blob")
	for _, tc := range []struct {
		spec string
		code codes.Code
	}{
		{"disk:T", codes.ResourceExhausted},
		{"disk:T?max_size=0", codes.OK},
		{"disk:T?max_size=1KiB", codes.OK},
	} {
		spec, err := Parse(strings.ReplaceAll(tc.spec, "T", t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, spec, Options{DiskMaxSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := PutBytes(ctx, s, d, b); status.Code(err) != tc.code {
			t.Errorf("%s: Put of %d bytes: %v, want %v", tc.spec, len(b), err, tc.code)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	clearAWSEnv(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	if _, err := NewDisk(store, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec, want string
	}{
		{"s3://bucket?endpoint=http://127.0.0.1:1", "s3://bucket?endpoint=http://127.0.0.1:1: S3 bucket bucket at http://127.0.0.1:1: no credentials"},
		{"mirror(disk:" + store + ",s3://bucket?endpoint=http://127.0.0.1:1)", "no credentials"},
		{"disk:" + home, "holds notes.txt, which is not a blob store's"},
		{"grpcs://cas:443?ca=" + filepath.Join(home, "none.pem"), "reading CA certificate"},
	} {
		spec, err := Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, spec, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v, want %q", tc.spec, err, tc.want)
		}
	}
	// A directory a Disk made is fine to open again.
	spec, _ := Parse("disk:" + store)
	if _, err := Open(ctx, spec, Options{}); err != nil {
		t.Fatalf("reopening a store: %v", err)
	}
}
