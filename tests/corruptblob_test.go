package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Two outputs of a remote Bazel build have a byte flipped in their files in
// the server's CAS. A read of one answers NOT_FOUND, never the wrong bytes,
// and the blob is gone from the CAS; Bazel, building again from clean,
// runs again the action whose output is gone and the one whose cached
// output fails to download, and the build is green with the right
// outputs, stored whole again.
func TestCorruptBlobOnDisk(t *testing.T) {
	ws := newBazelWorkspace(t)
	build := `genrule(
    name = "big1",
    outs = ["big1.txt"],
    cmd = "seq 1 30000 > $@",
)

genrule(
    name = "big2",
    outs = ["big2.txt"],
    cmd = "seq 2 30001 > $@",
)

genrule(
    name = "lines",
    srcs = [":big1", ":big2"],
    outs = ["lines.txt"],
    cmd = "cat $(SRCS) | wc -l > $@",
)
`
	if err := os.WriteFile(filepath.Join(ws.dir, "slow", "BUILD"), []byte(build), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t)
	startWorker(t, srv, "w1", "--action-slots", "2")
	remote := "--remote_executor=grpc://" + srv.Addr
	if out, err := ws.bazel("build", remote, "//slow:lines"); err != nil {
		t.Fatalf("the first build: %v\n%s", err, out)
	}
	outputs := map[string][]byte{}
	var blobs []digest.Digest
	for _, name := range []string{"big1.txt", "big2.txt", "lines.txt"} {
		b, err := os.ReadFile(filepath.Join(ws.dir, "bazel-bin", "slow", name))
		if err != nil {
			t.Fatal(err)
		}
		outputs[name] = b
		if name != "lines.txt" {
			blobs = append(blobs, digest.FromBytes(b))
		}
	}
	for _, d := range blobs {
		// The file is read-only, as the CAS keeps it; the disk does not care.
		p := filepath.Join(srv.DataDir, "cas", d.Hash()[:2], fmt.Sprintf("%s-%d", d.Hash(), d.Size()))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}

	conn, err := client.Dial(client.Options{Target: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cas := client.NewCAS(conn, "")
	ctx := context.Background()
	var got bytes.Buffer
	err = cas.Read(ctx, blobs[0], &got)
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("reading the corrupted blob: %v; want NOT_FOUND saying it was corrupt", err)
	}
	if got.Len() == int(blobs[0].Size()) {
		t.Fatalf("the read passed on all %d bytes", got.Len())
	}
	if missing, err := cas.FindMissing(ctx, blobs); err != nil || len(missing) != 1 || missing[0] != blobs[0] {
		t.Fatalf("FindMissing after the read: %v, %v; want the corrupted blob read missing", missing, err)
	}

	if out, err := ws.bazel("clean"); err != nil {
		t.Fatalf("bazel clean: %v\n%s", err, out)
	}
	out, err := ws.bazel("build", remote, "//slow:lines")
	if err != nil {
		t.Fatalf("the build after the corruption: %v\n%s", err, out)
	}
	if kinds := processes(t, out); kinds["remote"] != 2 || kinds["remote cache hit"] != 1 {
		t.Fatalf("processes %v; want the two actions whose outputs were corrupted run again, and the other a cache hit\n%s", kinds, out)
	}
	for name, want := range outputs {
		b, err := os.ReadFile(filepath.Join(ws.dir, "bazel-bin", "slow", name))
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s after the corruption: %d bytes, %v; want the %d bytes of the first build", name, len(b), err, len(want))
		}
	}
	if missing, err := cas.FindMissing(ctx, blobs); err != nil || len(missing) != 0 {
		t.Fatalf("FindMissing after the build: %v, %v; want both blobs stored again", missing, err)
	}
	for _, d := range blobs {
		got.Reset()
		if err := cas.Read(ctx, d, &got); err != nil || digest.FromBytes(got.Bytes()) != d {
			t.Fatalf("reading %s after the build: %v", d, err)
		}
	}
}
