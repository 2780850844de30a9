package blobstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// startServer starts an rbs server over 127.0.0.1 with in-memory stores,
// requiring token when it is set, and returns its address and stores.
func startServer(t *testing.T, token string) (addr string, cas, ac blobstore.Store) {
	t.Helper()
	cas, ac = blobstore.ContentAddressed(blobstore.NewMemory()), blobstore.NewMemory()
	srv := server.New(server.Config{CAS: cas, AC: ac, Token: token})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), cas, ac
}

// open parses and opens spec, with T replaced by a temporary directory, its
// connections closed when the test ends.
func open(t *testing.T, spec string, o blobstore.Options) blobstore.Store {
	t.Helper()
	// Not t.TempDir: a subtest's has its name, parentheses and all.
	dir, err := os.MkdirTemp("", "blobstore")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s, err := blobstore.Parse(strings.ReplaceAll(spec, "T/", dir+"/"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := blobstore.Open(ctx, s, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func read(t *testing.T, s blobstore.Store, d digest.Digest, offset int64) (string, error) {
	t.Helper()
	rc, err := s.Get(context.Background(), d, offset)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// A blob written through a store chain whose remote is a real rbs server is
// on that server, and reads back through the chain from any offset;
// FindMissing is exact.
func TestGRPCBackendAgainstAServer(t *testing.T) {
	ctx := context.Background()
	addr, serverCAS, _ := startServer(t, "")
	for _, spec := range []string{
		"grpc://ADDR",
		"grpc://ADDR/some/instance",
		"cache(disk:T/cache, grpc://ADDR)",
		"mirror(disk:T/mirror, grpc://ADDR)",
	} {
		spec = strings.ReplaceAll(spec, "ADDR", addr)
		t.Run(spec, func(t *testing.T) {
			s := blobstore.ContentAddressed(open(t, spec, blobstore.Options{}))
			small := []byte("a small blob for " + spec)
			big := bytes.Repeat([]byte(spec), 3<<20/len(spec)) // several ByteStream chunks
			for _, data := range [][]byte{small, big} {
				d := digest.FromBytes(data)
				if err := blobstore.PutBytes(ctx, s, d, data); err != nil {
					t.Fatal(err)
				}
				if got, err := blobstore.GetBytes(ctx, serverCAS, d); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("the server holds %d bytes, %v; want the %d written", len(got), err, len(data))
				}
				for _, offset := range []int64{0, 1, d.Size() / 2, d.Size() - 1, d.Size()} {
					got, err := read(t, s, d, offset)
					if err != nil || got != string(data[offset:]) {
						t.Fatalf("Get from offset %d: %d bytes, %v; want %d", offset, len(got), err, d.Size()-offset)
					}
				}
				if _, err := s.Get(ctx, d, d.Size()+1); status.Code(err) != codes.OutOfRange {
					t.Fatalf("Get past the end: %v, want OutOfRange", err)
				}
			}
			absent := digest.FromBytes([]byte("never written " + spec))
			if _, err := s.Get(ctx, absent, 0); !blobstore.IsNotFound(err) {
				t.Fatalf("Get of an absent blob: %v, want NotFound", err)
			}
			present := digest.FromBytes(small)
			missing, err := s.FindMissing(ctx, []digest.Digest{present, absent, digest.FromBytes(big)})
			if err != nil || len(missing) != 1 || missing[0] != absent {
				t.Fatalf("FindMissing = %v, %v; want [%s]", missing, err, absent)
			}
		})
	}
}

// An action result written through a grpc action-cache backend is the
// server's, reads back as the same ActionResult, and FindMissing answers
// what GetActionResult does: a result whose outputs are gone is missing.
func TestGRPCActionCacheAgainstAServer(t *testing.T) {
	ctx := context.Background()
	addr, serverCAS, serverAC := startServer(t, "")
	ac := open(t, "grpc://"+addr, blobstore.Options{Kind: blobstore.ACKind})

	out := []byte("output of the action")
	outD := digest.FromBytes(out)
	if err := blobstore.PutBytes(ctx, serverCAS, outD, out); err != nil {
		t.Fatal(err)
	}
	gone := digest.FromBytes([]byte("output no longer in the CAS"))
	results := map[digest.Digest]*repb.ActionResult{}
	for i, res := range []*repb.ActionResult{
		{ExitCode: 3, OutputFiles: []*repb.OutputFile{{Path: "out", Digest: outD.Proto()}}},
		{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: gone.Proto()}}},
	} {
		key := digest.FromBytes([]byte(fmt.Sprintf("action %d", i)))
		results[key] = res
		b, err := proto.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if err := blobstore.PutBytes(ctx, ac, key, b); err != nil {
			t.Fatal(err)
		}
		if stored, err := blobstore.GetBytes(ctx, serverAC, key); err != nil || !bytes.Equal(stored, b) {
			t.Fatalf("the server's action cache holds %x, %v", stored, err)
		}
	}
	hit := digest.FromBytes([]byte("action 0"))
	stale := digest.FromBytes([]byte("action 1"))
	absent := digest.FromBytes([]byte("action never run"))

	b, err := blobstore.GetBytes(ctx, ac, hit)
	if err != nil {
		t.Fatal(err)
	}
	got := &repb.ActionResult{}
	if err := proto.Unmarshal(b, got); err != nil || !proto.Equal(got, results[hit]) {
		t.Fatalf("Get = %v, %v; want %v", got, err, results[hit])
	}
	if rest, err := read(t, ac, hit, 2); err != nil || rest != string(b[2:]) {
		t.Fatalf("Get from offset 2 = %x, %v", rest, err)
	}
	for _, key := range []digest.Digest{stale, absent} {
		if _, err := ac.Get(ctx, key, 0); !blobstore.IsNotFound(err) {
			t.Fatalf("Get %s: %v, want NotFound", key, err)
		}
	}
	missing, err := ac.FindMissing(ctx, []digest.Digest{hit, stale, absent})
	if err != nil || len(missing) != 2 || missing[0] != stale || missing[1] != absent {
		t.Fatalf("FindMissing = %v, %v; want [%s %s]", missing, err, stale, absent)
	}
	if err := blobstore.PutBytes(ctx, ac, absent, []byte("not an ActionResult \xff")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Put of bytes that are no ActionResult: %v, want InvalidArgument", err)
	}
}

// The bearer token comes from the spec's token_file, else Options.Token;
// without one a server that needs it refuses.
func TestGRPCBackendToken(t *testing.T) {
	ctx := context.Background()
	addr, _, _ := startServer(t, "s3cret")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := digest.FromBytes([]byte("x"))
	for _, tc := range []struct {
		name  string
		spec  string
		token string
		code  codes.Code
	}{
		{"token file", "grpc://" + addr + "?token_file=" + tokenFile, "", codes.OK},
		{"token file over options", "grpc://" + addr + "?token_file=" + tokenFile, "wrong", codes.OK},
		{"options", "grpc://" + addr, "s3cret", codes.OK},
		{"none", "grpc://" + addr, "", codes.Unauthenticated},
		{"wrong", "grpc://" + addr, "wrong", codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kind := range []blobstore.Kind{blobstore.CASKind, blobstore.ACKind} {
				s := open(t, tc.spec, blobstore.Options{Kind: kind, Token: tc.token})
				if _, err := s.FindMissing(ctx, []digest.Digest{d}); status.Code(err) != tc.code {
					t.Fatalf("%s FindMissing: %v, want %v", kind, err, tc.code)
				}
			}
		})
	}
}

// A remote nobody answers at is Unavailable, which a mirror rides out on
// its other side.
func TestGRPCBackendDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	d := digest.FromBytes([]byte("written while the remote is down"))
	remote := open(t, "grpc://"+addr, blobstore.Options{})
	if _, err := remote.FindMissing(ctx, []digest.Digest{d}); status.Code(err) != codes.Unavailable {
		t.Fatalf("FindMissing on a remote that is down: %v, want Unavailable", err)
	}
	m := open(t, "mirror(disk:T/a, grpc://"+addr+")", blobstore.Options{})
	if err := blobstore.PutBytes(ctx, m, d, []byte("written while the remote is down")); err != nil {
		t.Fatalf("Put to a mirror with its remote down: %v", err)
	}
	for range 2 {
		if _, err := blobstore.GetBytes(ctx, m, d); err != nil {
			t.Fatalf("Get from a mirror with its remote down: %v", err)
		}
	}
	if missing, err := m.FindMissing(ctx, []digest.Digest{d}); err != nil || len(missing) != 0 {
		t.Fatalf("FindMissing = %v, %v; want none", missing, err)
	}
}
