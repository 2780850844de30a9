package blobstore

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// knowing is a remote that has every blob already: its Put returns at once
// without reading, as a ByteStream server that has the blob ends the write.
type knowing struct{ Store }

func (knowing) Put(context.Context, digest.Digest, io.Reader) error { return nil }

func newCache(t *testing.T, bound int64) (*Cache, *Disk, *Memory) {
	t.Helper()
	local, err := NewDisk(t.TempDir(), bound)
	if err != nil {
		t.Fatal(err)
	}
	remote := NewMemory()
	return NewCache(local, remote), local, remote
}

func onDisk(t *testing.T, d *Disk, key digest.Digest) string {
	t.Helper()
	b, err := GetBytes(context.Background(), d, key)
	if IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A read from the start of a blob only the remote has fills the local disk
// once it is read to its end; a read closed early or from an offset does
// not.
func TestCacheReadThrough(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("abcdefghij", 400000)
	for _, tc := range []struct {
		name   string
		data   string
		offset int64
		read   int // bytes read before Close; -1: to the end
		filled bool
	}{
		{"small, read whole", "read through", 0, -1, true},
		{"big, read whole", big, 0, -1, true},
		{"closed early", big, 0, 1 << 20, false},
		{"from an offset", "read through", 5, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, local, remote := newCache(t, 0)
			d := digest.FromBytes([]byte(tc.data))
			if err := PutBytes(ctx, remote, d, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			rc, err := c.Get(ctx, d, tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if tc.read < 0 {
				got, err = io.ReadAll(rc)
			} else {
				got = make([]byte, tc.read)
				_, err = io.ReadFull(rc, got)
			}
			if err != nil {
				t.Fatal(err)
			}
			rc.Close()
			if want := tc.data[tc.offset:][:len(got)]; string(got) != want {
				t.Fatalf("read %d bytes that are not the blob's", len(got))
			}
			if filled := onDisk(t, local, d) == tc.data; filled != tc.filled {
				t.Fatalf("on the local disk: %v, want %v", filled, tc.filled)
			}
			if !tc.filled && onDisk(t, local, d) != "" {
				t.Fatal("a partial copy is on the local disk")
			}
			// The next read is served locally even with the remote gone.
			if tc.filled {
				remote.Delete(d)
				if b, err := GetBytes(ctx, c, d); err != nil || string(b) != tc.data {
					t.Fatalf("second read: %d bytes, %v", len(b), err)
				}
			}
		})
	}
}

func TestCacheGetMisses(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newCache(t, 0)
	d, _ := blob("nowhere")
	if _, err := c.Get(ctx, d, 0); !IsNotFound(err) {
		t.Fatalf("Get of a blob on neither tier: %v, want NotFound", err)
	}
}

func TestCachePut(t *testing.T) {
	ctx := context.Background()
	d, data := blob("0123456789")
	down := status.Error(codes.Unavailable, "remote down")
	for _, tc := range []struct {
		name     string
		bound    int64 // of the local disk
		remote   func(Store) Store
		code     codes.Code
		onLocal  bool
		onRemote bool
		reader   io.Reader
	}{
		{name: "both", code: codes.OK, onLocal: true, onRemote: true},
		{name: "remote fails", remote: func(s Store) Store { return failing{s, down} }, code: codes.Unavailable},
		{name: "too big for the disk", bound: 5, code: codes.OK, onRemote: true},
		{name: "remote has it", remote: func(s Store) Store { return knowing{s} }, code: codes.OK, onLocal: true},
		{name: "broken reader", reader: &brokenReader{}, code: codes.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local, err := NewDisk(t.TempDir(), tc.bound)
			if err != nil {
				t.Fatal(err)
			}
			mem := NewMemory()
			var remote Store = mem
			if tc.remote != nil {
				remote = tc.remote(mem)
			}
			r := tc.reader
			if r == nil {
				r = strings.NewReader(string(data))
			}
			if err := NewCache(local, remote).Put(ctx, d, r); status.Code(err) != tc.code {
				t.Fatalf("Put: %v, want %v", err, tc.code)
			}
			if got := onDisk(t, local, d); (got == string(data)) != tc.onLocal || got != "" && got != string(data) {
				t.Fatalf("local copy %q, want the blob: %v", got, tc.onLocal)
			}
			if has(mem, d) != tc.onRemote {
				t.Fatalf("on the remote: %v, want %v", has(mem, d), tc.onRemote)
			}
		})
	}
}

// FindMissing is the remote's answer: a blob cached locally that the remote
// has lost is missing.
func TestCacheFindMissingAsksTheRemote(t *testing.T) {
	ctx := context.Background()
	c, local, remote := newCache(t, 0)
	both, bothData := blob("on both")
	localOnly, localData := blob("cached, gone from the remote")
	remoteOnly, remoteData := blob("remote only")
	absent, _ := blob("absent")
	for _, p := range []struct {
		s Store
		d digest.Digest
		b []byte
	}{{c, both, bothData}, {local, localOnly, localData}, {remote, remoteOnly, remoteData}} {
		if err := PutBytes(ctx, p.s, p.d, p.b); err != nil {
			t.Fatal(err)
		}
	}
	missing, err := c.FindMissing(ctx, []digest.Digest{both, localOnly, remoteOnly, absent})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 2 || missing[0] != localOnly || missing[1] != absent {
		t.Fatalf("FindMissing = %v, want [%s %s]", missing, localOnly, absent)
	}
}
