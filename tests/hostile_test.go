package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestHostileRequests sends a real server the requests a hostile client
// would: declared sizes it cannot hold, zstd bombs, a directory DAG that is
// exponential as a tree, and oversized Actions, Commands and Trees. Each
// must be answered with an error while the server keeps serving.
func TestHostileRequests(t *testing.T) {
	srv := startServer(t)
	conn, err := client.Dial(client.Options{Target: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cas := repb.NewContentAddressableStorageClient(conn)
	alive := func(after string) {
		t.Helper()
		if _, err := repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); err != nil {
			t.Fatalf("after %s the server no longer serves: %v\nserver log:\n%s", after, err, srv.log.String())
		}
	}
	wantCode := func(what string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
		alive(what)
	}

	// 1 GiB of zeros compresses to a few tens of KiB.
	var bomb bytes.Buffer
	enc, _ := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if _, err := io.CopyN(enc, zeros{}, 1<<30); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	t.Logf("zstd bomb: %d bytes decoding to 1 GiB", bomb.Len())

	huge := &repb.Digest{Hash: strings.Repeat("ab", 32), SizeBytes: 1 << 62}
	_, err = cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: huge, Data: bomb.Bytes(), Compressor: repb.Compressor_ZSTD},
	}})
	wantCode("a zstd blob declaring 2^62 bytes", err, codes.InvalidArgument)

	oneMiB := &repb.Digest{Hash: strings.Repeat("cd", 32), SizeBytes: 1 << 20}
	resp, err := cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: oneMiB, Data: bomb.Bytes(), Compressor: repb.Compressor_ZSTD},
	}})
	if err != nil || len(resp.Responses) != 1 {
		t.Fatalf("a batched zstd bomb: %v %v", resp, err)
	}
	wantCode("a batched zstd bomb", status.ErrorProto(resp.Responses[0].Status), codes.InvalidArgument)

	bs := bspb.NewByteStreamClient(conn)
	write := func(name string, data []byte) error {
		w, err := bs.Write(ctx)
		if err != nil {
			return err
		}
		for off := 0; ; off += 1 << 20 {
			end := min(off+1<<20, len(data))
			req := &bspb.WriteRequest{ResourceName: name, WriteOffset: int64(off), Data: data[off:end], FinishWrite: end == len(data)}
			if err := w.Send(req); err != nil {
				break // the server ended the call; its answer says why
			}
			if end == len(data) {
				break
			}
		}
		_, err = w.CloseAndRecv()
		return err
	}
	err = write(fmt.Sprintf("uploads/u1/compressed-blobs/zstd/%s/%d", oneMiB.Hash, oneMiB.SizeBytes), bomb.Bytes())
	wantCode("a streamed zstd bomb", err, codes.InvalidArgument)

	// A DAG of 40 levels, each naming the next directory 64 times: 41
	// distinct directories, 64^40 paths.
	var dirs [][]byte
	child := &repb.Directory{}
	b, _ := proto.Marshal(child)
	dirs = append(dirs, b)
	for level := 0; level < 40; level++ {
		cd := digest.FromBytes(b)
		parent := &repb.Directory{}
		for i := 0; i < 64; i++ {
			parent.Directories = append(parent.Directories, &repb.DirectoryNode{Name: fmt.Sprintf("d%02d", i), Digest: cd.Proto()})
		}
		b, _ = proto.Marshal(parent)
		dirs = append(dirs, b)
	}
	var batch []*repb.BatchUpdateBlobsRequest_Request
	for _, d := range dirs {
		batch = append(batch, &repb.BatchUpdateBlobsRequest_Request{Digest: digest.FromBytes(d).Proto(), Data: d})
	}
	if _, err := cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: batch}); err != nil {
		t.Fatal(err)
	}
	tree, err := cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: digest.FromBytes(b).Proto()})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		page, err := tree.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("GetTree of the DAG: %v", err)
		}
		got += len(page.Directories)
	}
	if got != len(dirs) {
		t.Errorf("GetTree of the DAG returned %d directories, want its %d distinct ones", got, len(dirs))
	}
	alive("GetTree of an exponential DAG")

	upload := func(data []byte) *repb.Digest {
		t.Helper()
		d := digest.FromBytes(data)
		if err := write(fmt.Sprintf("uploads/u2/blobs/%s/%d", d.Hash(), d.Size()), data); err != nil {
			t.Fatalf("uploading %d bytes: %v", len(data), err)
		}
		return d.Proto()
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	exec := repb.NewExecutionClient(conn)
	execute := func(action *repb.Digest) error {
		st, err := exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: action, SkipCacheLookup: true})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	err = execute(upload(random(2 << 20)))
	wantCode("Execute of a 2 MiB Action", err, codes.InvalidArgument)
	if err != nil && !strings.Contains(err.Error(), "limit") {
		t.Errorf("the oversized Action's error does not name the limit: %v", err)
	}
	action, _ := proto.Marshal(&repb.Action{CommandDigest: upload(random(20 << 20)), InputRootDigest: digest.Empty.Proto()})
	err = execute(upload(action))
	wantCode("Execute of an Action with a 20 MiB Command", err, codes.InvalidArgument)

	ac := repb.NewActionCacheClient(conn)
	key := digest.FromBytes([]byte("hostile action")).Proto()
	res := &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "out", TreeDigest: upload(random(65 << 20))}}}
	if _, err := ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: key, ActionResult: res}); err != nil {
		t.Fatal(err)
	}
	_, err = ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: key})
	wantCode("GetActionResult whose output Tree is 65 MiB", err, codes.NotFound)

	t.Logf("server peak RSS after the hostile requests: %s", peakRSS(t, srv.cmd.Process.Pid))
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// peakRSS reads a process's peak resident set size from /proc.
func peakRSS(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
