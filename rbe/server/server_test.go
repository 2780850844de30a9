package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/scheduler"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type env struct {
	conn *grpc.ClientConn
	cas  blobstore.Store
	ac   blobstore.Store
	addr string
}

func start(t *testing.T, cfg Config, dial client.Options) *env {
	t.Helper()
	if cfg.CAS == nil {
		cfg.CAS = blobstore.ContentAddressed(blobstore.NewMemory())
	}
	if cfg.AC == nil {
		cfg.AC = blobstore.NewMemory()
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	dial.Target = lis.Addr().String()
	if cfg.TLS != nil {
		dial.Target = "grpcs://" + dial.Target
	}
	conn, err := client.Dial(dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{conn: conn, cas: cfg.CAS, ac: cfg.AC, addr: lis.Addr().String()}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestCapabilities(t *testing.T) {
	e := start(t, Config{}, client.Options{})
	caps, err := repb.NewCapabilitiesClient(e.conn).GetCapabilities(ctx(t), &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if caps.LowApiVersion.Major != 2 || caps.LowApiVersion.Minor != 0 {
		t.Errorf("low API version %v, want 2.0", caps.LowApiVersion)
	}
	if caps.ExecutionCapabilities.ExecEnabled {
		t.Error("execution advertised, but this server does not execute")
	}
	if got := caps.CacheCapabilities.DigestFunctions; len(got) != 1 || got[0] != repb.DigestFunction_SHA256 {
		t.Errorf("digest functions %v", got)
	}
	if !caps.CacheCapabilities.ActionCacheUpdateCapabilities.UpdateEnabled {
		t.Error("action cache updates not advertised")
	}
}

func TestCapabilitiesWithExecution(t *testing.T) {
	e := start(t, Config{Scheduler: scheduler.New(scheduler.Config{NewID: func() string { return "id" }})}, client.Options{})
	caps, err := repb.NewCapabilitiesClient(e.conn).GetCapabilities(ctx(t), &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !caps.ExecutionCapabilities.ExecEnabled {
		t.Error("a server with a scheduler does not advertise execution")
	}
}

func TestBatchCalls(t *testing.T) {
	e := start(t, Config{}, client.Options{})
	c := repb.NewContentAddressableStorageClient(e.conn)
	good, bad := []byte("good"), []byte("bad")
	gd := digest.FromBytes(good)
	resp, err := c.BatchUpdateBlobs(ctx(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: gd.Proto(), Data: good},
		{Digest: digest.FromBytes([]byte("other")).Proto(), Data: bad},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if code := codes.Code(resp.Responses[0].Status.Code); code != codes.OK {
		t.Errorf("good blob: %v", resp.Responses[0].Status)
	}
	if code := codes.Code(resp.Responses[1].Status.Code); code != codes.InvalidArgument {
		t.Errorf("corrupt blob: %v, want InvalidArgument", resp.Responses[1].Status)
	}

	missing, err := client.NewCAS(e.conn, "").FindMissing(ctx(t), []digest.Digest{gd, digest.FromBytes(bad), digest.FromBytes([]byte("other"))})
	if err != nil || len(missing) != 2 {
		t.Fatalf("FindMissing = %v, %v; want the two absent blobs", missing, err)
	}

	read, err := c.BatchReadBlobs(ctx(t), &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{gd.Proto(), digest.FromBytes(bad).Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read.Responses[0].Data, good) || codes.Code(read.Responses[1].Status.Code) != codes.NotFound {
		t.Errorf("BatchReadBlobs = %v", read.Responses)
	}

	enc, _ := zstd.NewWriter(nil)
	zd := []byte("compressed in a batch")
	resp, err = c.BatchUpdateBlobs(ctx(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: digest.FromBytes(zd).Proto(), Data: enc.EncodeAll(zd, nil), Compressor: repb.Compressor_ZSTD},
	}})
	if err != nil || resp.Responses[0].Status.Code != 0 {
		t.Fatalf("zstd batch update: %v %v", resp, err)
	}

	_, err = c.FindMissingBlobs(ctx(t), &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{{Hash: "xyz", SizeBytes: 1}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad digest: %v, want InvalidArgument", err)
	}
	big := make([]byte, MaxBatchSize+1)
	_, err = c.BatchUpdateBlobs(ctx(t), &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: digest.FromBytes(big).Proto(), Data: big}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("oversized batch: %v, want InvalidArgument", err)
	}
}

func randomBlob(n int) ([]byte, digest.Digest) {
	b := make([]byte, n)
	rand.Read(b)
	return b, digest.FromBytes(b)
}

func readAll(t *testing.T, bs bspb.ByteStreamClient, req *bspb.ReadRequest) ([]byte, error) {
	stream, err := bs.Read(ctx(t), req)
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp.Data...)
	}
}

func TestByteStreamReadWrite(t *testing.T) {
	disk, err := blobstore.NewDisk(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, Config{CAS: blobstore.ContentAddressed(disk)}, client.Options{})
	data, d := randomBlob(3<<20 + 17)
	cas := client.NewCAS(e.conn, "main")
	if err := cas.Write(ctx(t), client.Blob{Digest: d, Data: data}); err != nil {
		t.Fatal(err)
	}
	// A second write of the same blob returns early.
	if err := cas.Write(ctx(t), client.Blob{Digest: d, Data: data}); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	var got bytes.Buffer
	if err := cas.Read(ctx(t), d, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("Read: %v (got %d bytes)", err, got.Len())
	}

	bs := bspb.NewByteStreamClient(e.conn)
	name := fmt.Sprintf("blobs/%s/%d", d.Hash(), d.Size())
	tests := []struct {
		offset, limit int64
		want          []byte
		code          codes.Code
	}{
		{0, 0, data, codes.OK},
		{1000, 0, data[1000:], codes.OK},
		{1000, 10, data[1000:1010], codes.OK},
		{d.Size(), 0, nil, codes.OK},
		{d.Size() + 1, 0, nil, codes.OutOfRange},
		{-1, 0, nil, codes.OutOfRange},
		{0, -1, nil, codes.InvalidArgument},
	}
	for _, tt := range tests {
		got, err := readAll(t, bs, &bspb.ReadRequest{ResourceName: name, ReadOffset: tt.offset, ReadLimit: tt.limit})
		if status.Code(err) != tt.code || (err == nil && !bytes.Equal(got, tt.want)) {
			t.Errorf("Read offset %d limit %d: %d bytes, %v; want %d bytes, %v", tt.offset, tt.limit, len(got), err, len(tt.want), tt.code)
		}
	}
	_, absent := randomBlob(10)
	if _, err := readAll(t, bs, &bspb.ReadRequest{ResourceName: fmt.Sprintf("blobs/%s/10", absent.Hash())}); status.Code(err) != codes.NotFound {
		t.Errorf("Read of absent blob: %v, want NotFound", err)
	}
	if _, err := readAll(t, bs, &bspb.ReadRequest{ResourceName: "blobs/../../etc/passwd"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Read of a traversal name: %v, want InvalidArgument", err)
	}

	// zstd both ways.
	zdata := bytes.Repeat([]byte("compressible "), 100000)
	zd := digest.FromBytes(zdata)
	enc, _ := zstd.NewWriter(nil)
	compressed := enc.EncodeAll(zdata, nil)
	w, err := bs.Write(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	half := len(compressed) / 2
	w.Send(&bspb.WriteRequest{ResourceName: fmt.Sprintf("uploads/u/compressed-blobs/zstd/%s/%d", zd.Hash(), zd.Size()), Data: compressed[:half]})
	w.Send(&bspb.WriteRequest{WriteOffset: int64(half), Data: compressed[half:], FinishWrite: true})
	wr, err := w.CloseAndRecv()
	if err != nil || wr.CommittedSize != int64(len(compressed)) {
		t.Fatalf("compressed write: %v, %v", wr, err)
	}
	got2, err := readAll(t, bs, &bspb.ReadRequest{ResourceName: fmt.Sprintf("compressed-blobs/zstd/%s/%d", zd.Hash(), zd.Size())})
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	plain, err := dec.DecodeAll(got2, nil)
	if err != nil || !bytes.Equal(plain, zdata) {
		t.Fatalf("compressed read: %v", err)
	}
}

func TestByteStreamRejectsCorruptWrite(t *testing.T) {
	e := start(t, Config{}, client.Options{})
	data, d := randomBlob(2 << 20)
	data[100] ^= 1
	err := client.NewCAS(e.conn, "").Write(ctx(t), client.Blob{Digest: d, Data: data})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("corrupt write: %v, want InvalidArgument", err)
	}
	if missing, _ := e.cas.FindMissing(ctx(t), []digest.Digest{d}); len(missing) != 1 {
		t.Fatal("corrupt blob became visible")
	}
}

func TestByteStreamResumableWrite(t *testing.T) {
	e := start(t, Config{}, client.Options{})
	data, d := randomBlob(1 << 20)
	bs := bspb.NewByteStreamClient(e.conn)
	name := fmt.Sprintf("uploads/5a3c/blobs/%s/%d", d.Hash(), d.Size())

	// First attempt: half the data, then the client goes away.
	c1, cancel := context.WithCancel(ctx(t))
	w, err := bs.Write(c1)
	if err != nil {
		t.Fatal(err)
	}
	half := int64(len(data) / 2)
	if err := w.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:half]}); err != nil {
		t.Fatal(err)
	}
	var committed int64
	for deadline := time.Now().Add(10 * time.Second); committed != half; {
		st, err := bs.QueryWriteStatus(ctx(t), &bspb.QueryWriteStatusRequest{ResourceName: name})
		if err == nil {
			committed = st.CommittedSize
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed size never reached %d: %v, %v", half, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()

	// Resume from the committed offset.
	w, err = bs.Write(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&bspb.WriteRequest{ResourceName: name, WriteOffset: committed, Data: data[committed:], FinishWrite: true}); err != nil {
		t.Fatal(err)
	}
	resp, err := w.CloseAndRecv()
	if err != nil || resp.CommittedSize != d.Size() {
		t.Fatalf("resumed write: %v, %v", resp, err)
	}
	st, err := bs.QueryWriteStatus(ctx(t), &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || !st.Complete {
		t.Fatalf("status after completion: %v, %v", st, err)
	}

	// A write that does not continue at the committed offset is refused.
	w, _ = bs.Write(ctx(t))
	w.Send(&bspb.WriteRequest{ResourceName: "uploads/other/blobs/" + digest.FromBytes([]byte("x")).Hash() + "/1", WriteOffset: 5, Data: []byte("x")})
	if _, err := w.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("write at a bad offset: %v, want InvalidArgument", err)
	}
}

func TestActionCacheServesOnlyCompleteResults(t *testing.T) {
	mem := blobstore.NewMemory()
	e := start(t, Config{CAS: blobstore.ContentAddressed(mem)}, client.Options{})
	ac := repb.NewActionCacheClient(e.conn)
	out, outD := randomBlob(100)
	treeFile, treeFileD := randomBlob(50)
	tree := &repb.Tree{Root: &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: treeFileD.Proto()}}}}
	treeBytes, _ := proto.Marshal(tree)
	treeD := digest.FromBytes(treeBytes)
	action := digest.FromBytes([]byte("action"))
	res := &repb.ActionResult{
		OutputFiles:       []*repb.OutputFile{{Path: "out", Digest: outD.Proto()}},
		OutputDirectories: []*repb.OutputDirectory{{Path: "dir", TreeDigest: treeD.Proto()}},
		StdoutDigest:      digest.Empty.Proto(),
	}
	if _, err := ac.UpdateActionResult(ctx(t), &repb.UpdateActionResultRequest{ActionDigest: action.Proto(), ActionResult: res}); err != nil {
		t.Fatal(err)
	}
	get := func() error {
		_, err := ac.GetActionResult(ctx(t), &repb.GetActionResultRequest{ActionDigest: action.Proto()})
		return err
	}
	steps := []struct {
		name string
		put  []byte
		want codes.Code
	}{
		{"nothing uploaded", nil, codes.NotFound},
		{"output file only", out, codes.NotFound},
		{"tree without its file", treeBytes, codes.NotFound},
		{"everything", treeFile, codes.OK},
	}
	for _, s := range steps {
		if s.put != nil {
			if err := blobstore.PutBytes(ctx(t), e.cas, digest.FromBytes(s.put), s.put); err != nil {
				t.Fatal(err)
			}
		}
		if err := get(); status.Code(err) != s.want {
			t.Fatalf("%s: GetActionResult = %v, want %v", s.name, err, s.want)
		}
	}
	r, err := ac.GetActionResult(ctx(t), &repb.GetActionResultRequest{ActionDigest: action.Proto(), InlineOutputFiles: []string{"out"}})
	if err != nil || !bytes.Equal(r.OutputFiles[0].Contents, out) {
		t.Fatalf("inlined output: %v", err)
	}
	// An evicted output makes the entry a miss again.
	mem.Delete(outD)
	if err := get(); status.Code(err) != codes.NotFound {
		t.Fatalf("after eviction: GetActionResult = %v, want NotFound", err)
	}
}

func TestGetTreePages(t *testing.T) {
	e := start(t, Config{}, client.Options{})
	put := func(dir *repb.Directory) digest.Digest {
		b, _ := proto.Marshal(dir)
		d := digest.FromBytes(b)
		if err := blobstore.PutBytes(ctx(t), e.cas, d, b); err != nil {
			t.Fatal(err)
		}
		return d
	}
	leafA := put(&repb.Directory{Files: []*repb.FileNode{{Name: "a"}}})
	leafB := put(&repb.Directory{Files: []*repb.FileNode{{Name: "b"}}})
	mid := put(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "a", Digest: leafA.Proto()}, {Name: "b", Digest: leafB.Proto()}}})
	root := put(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "mid", Digest: mid.Proto()}}})
	c := repb.NewContentAddressableStorageClient(e.conn)

	var all []*repb.Directory
	token, pages := "", 0
	for {
		stream, err := c.GetTree(ctx(t), &repb.GetTreeRequest{RootDigest: root.Proto(), PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, resp.Directories...)
		if token = resp.NextPageToken; token == "" {
			break
		}
	}
	if pages != 2 || len(all) != 4 {
		t.Fatalf("GetTree: %d pages, %d directories; want 2 pages, 4 directories", pages, len(all))
	}
	stream, _ := c.GetTree(ctx(t), &repb.GetTreeRequest{RootDigest: leafA.Proto(), PageToken: "-3"})
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad page token: %v", err)
	}
	stream, _ = c.GetTree(ctx(t), &repb.GetTreeRequest{RootDigest: digest.FromBytes([]byte("none")).Proto()})
	if _, err := stream.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("absent root: %v", err)
	}
}

// calls exercises one call of every service and returns their errors.
func calls(t *testing.T, conn *grpc.ClientConn) map[string]error {
	d := digest.FromBytes([]byte("x"))
	errs := map[string]error{}
	_, errs["Capabilities"] = repb.NewCapabilitiesClient(conn).GetCapabilities(ctx(t), &repb.GetCapabilitiesRequest{})
	_, errs["FindMissingBlobs"] = repb.NewContentAddressableStorageClient(conn).FindMissingBlobs(ctx(t), &repb.FindMissingBlobsRequest{})
	_, errs["UpdateActionResult"] = repb.NewActionCacheClient(conn).UpdateActionResult(ctx(t), &repb.UpdateActionResultRequest{ActionDigest: d.Proto(), ActionResult: &repb.ActionResult{}})
	_, errs["ByteStream.Read"] = readAll(t, bspb.NewByteStreamClient(conn), &bspb.ReadRequest{ResourceName: fmt.Sprintf("blobs/%s/0", digest.Empty.Hash())})
	errs["ByteStream.Write"] = client.NewCAS(conn, "").Write(ctx(t), client.Blob{Digest: d, Data: []byte("x")})
	_, errs["Health"] = healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
	return errs
}

func TestTokenGuardsEveryService(t *testing.T) {
	e := start(t, Config{Token: "s3cret"}, client.Options{Token: "s3cret"})
	for name, err := range calls(t, e.conn) {
		if err != nil {
			t.Errorf("%s with the right token: %v", name, err)
		}
	}
	for _, token := range []string{"", "wrong"} {
		conn, err := client.Dial(client.Options{Target: e.addr, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for name, err := range calls(t, conn) {
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s with token %q: %v, want Unauthenticated", name, token, err)
			}
		}
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert, caFile := selfSigned(t, dir)
	e := start(t, Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, Token: "tok"}, client.Options{CACert: caFile, Token: "tok"})
	for name, err := range calls(t, e.conn) {
		if err != nil {
			t.Errorf("%s over TLS: %v", name, err)
		}
	}
	plain, err := client.Dial(client.Options{Target: e.addr, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := client.Ping(ctx(t), plain); err == nil {
		t.Error("a plaintext client reached a TLS server")
	}
}

func selfSigned(t *testing.T, dir string) (tls.Certificate, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rbs test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, caFile
}

// A grpc:// backend that leads back to its own server, directly or through
// another, has the call refused with an error that says so, instead of the
// server calling itself for ever.
func TestBackendLoopsAreRefused(t *testing.T) {
	for _, servers := range []int{1, 2} {
		t.Run(fmt.Sprint(servers, " servers"), func(t *testing.T) {
			lis := make([]net.Listener, servers)
			for i := range lis {
				var err error
				if lis[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
			}
			for i := range lis {
				next, err := client.Dial(client.Options{Target: lis[(i+1)%servers].Addr().String()})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { next.Close() })
				s := New(Config{CAS: blobstore.NewRemote(next, ""), AC: blobstore.NewRemoteActionCache(next, "")})
				go s.Serve(lis[i])
				t.Cleanup(s.Stop)
			}
			conn, err := client.Dial(client.Options{Target: lis[0].Addr().String()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			_, d := randomBlob(10)
			_, err = repb.NewContentAddressableStorageClient(conn).FindMissingBlobs(ctx(t), &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{d.Proto()}})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "leads back to this server") {
				t.Fatalf("FindMissingBlobs through a loop: %v", err)
			}
			_, err = readAll(t, bspb.NewByteStreamClient(conn), &bspb.ReadRequest{ResourceName: "blobs/" + d.Hash() + "/10"})
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("a read through a loop: %v", err)
			}
		})
	}
}
