package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/blobstore/s3test"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
)

// casOf is a CAS client of a server, closed when the test ends.
func casOf(t *testing.T, srv *server) *client.CAS {
	t.Helper()
	conn, err := client.Dial(client.Options{Target: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return client.NewCAS(conn, "")
}

// blobs makes n distinct small blobs named for prefix.
func blobs(prefix string, n int) []client.Blob {
	out := make([]client.Blob, n)
	for i := range out {
		b := []byte(fmt.Sprintf("%s blob %d", prefix, i))
		out[i] = client.Blob{Digest: digest.FromBytes(b), Data: b}
	}
	return out
}

func digests(bs []client.Blob) []digest.Digest {
	out := make([]digest.Digest, len(bs))
	for i, b := range bs {
		out[i] = b.Digest
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A server whose CAS is a shard over three rbs servers spreads what it is
// sent within 20% of even, and FindMissingBlobs through it stays exact.
func TestCASShardOverServers(t *testing.T) {
	var backends []*server
	var specs []string
	for range 3 {
		s := startServer(t)
		backends = append(backends, s)
		specs = append(specs, "grpc://"+s.Addr)
	}
	front := startServer(t, "--cas", "shard("+strings.Join(specs, ",")+")")
	ctx := ctxT(t)
	bs := blobs("shard", 1500)
	if _, _, err := casOf(t, front).Upload(ctx, bs); err != nil {
		t.Fatal(err)
	}
	all := digests(bs)
	if missing, err := casOf(t, front).FindMissing(ctx, all); err != nil || len(missing) != 0 {
		t.Fatalf("through the shard %d of %d are missing, %v", len(missing), len(all), err)
	}
	total := 0
	for i, b := range backends {
		missing, err := casOf(t, b).FindMissing(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		held := len(all) - len(missing)
		total += held
		if even := len(all) / 3; held < even*8/10 || held > even*12/10 {
			t.Errorf("backend %d holds %d of %d blobs, more than 20%% off %d", i, held, len(all), even)
		}
	}
	if total != len(all) {
		t.Fatalf("the backends hold %d blobs in all, want each of the %d once", total, len(all))
	}
	extra := blobs("absent", 10)
	if missing, err := casOf(t, front).FindMissing(ctx, append(all[:5], digests(extra)...)); err != nil || len(missing) != len(extra) {
		t.Fatalf("FindMissingBlobs through the shard = %d missing, %v; want the %d never sent", len(missing), err, len(extra))
	}
}

// A mirror over two servers goes on while one is down, and repairs it once
// it is back.
func TestCASMirrorRepairs(t *testing.T) {
	a, b := startServer(t), startServer(t)
	front := startServer(t, "--cas", fmt.Sprintf("mirror(grpc://%s,grpc://%s)", a.Addr, b.Addr))
	ctx := ctxT(t)
	before := blobs("before", 50)
	if _, _, err := casOf(t, front).Upload(ctx, before); err != nil {
		t.Fatal(err)
	}
	for _, side := range []*server{a, b} {
		if missing, err := casOf(t, side).FindMissing(ctx, digests(before)); err != nil || len(missing) != 0 {
			t.Fatalf("a side of the mirror lacks %d blobs, %v", len(missing), err)
		}
	}

	b.cmd.Process.Kill()
	b.cmd.Wait()
	during := blobs("during", 50)
	if _, _, err := casOf(t, front).Upload(ctx, during); err != nil {
		t.Fatalf("writing with one side down: %v", err)
	}
	for _, bl := range append(before[:10], during[:10]...) {
		var got strings.Builder
		if err := casOf(t, front).Read(ctx, bl.Digest, &got); err != nil || got.String() != string(bl.Data) {
			t.Fatalf("reading %s with one side down: %q, %v", bl.Digest, got.String(), err)
		}
	}

	b.start(t, b.Addr)
	if missing, err := casOf(t, b).FindMissing(ctx, digests(during)); err != nil || len(missing) != len(during) {
		t.Fatalf("the side that was down holds %d of the blobs written meanwhile, %v", len(during)-len(missing), err)
	}
	// Once the mirror reaches the side again (its connection backs off a
	// while), FindMissingBlobs through it copies across what that side
	// lacks.
	lacking := -1
	eventually(t, "the side that was down to be repaired", func() bool {
		if missing, err := casOf(t, front).FindMissing(ctx, digests(during)); err != nil || len(missing) != 0 {
			t.Fatalf("through the mirror %d are missing, %v", len(missing), err)
		}
		missing, err := casOf(t, b).FindMissing(ctx, digests(during))
		if err != nil {
			t.Fatal(err)
		}
		lacking = len(missing)
		return lacking == 0
	}, func() string { return fmt.Sprintf("it lacks %d blobs", lacking) })
}

// A Bazel build's results, cached through one server whose CAS and action
// cache are a disk in front of S3, are cache hits through another server
// with empty disks of its own: what was written through one is read
// through the other, from the bucket.
func TestS3CacheServesBazel(t *testing.T) {
	s3 := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	remote := fmt.Sprintf("s3://%s/bazel?endpoint=%s&region=%s", s3.Bucket, s3.Endpoint, s3.Region)
	serve := func() *server {
		dir := t.TempDir()
		return startServer(t, "--cas", fmt.Sprintf("cache(disk:%s,%s)", filepath.Join(dir, "cas"), remote),
			"--ac", fmt.Sprintf("cache(disk:%s,%s)", filepath.Join(dir, "ac"), remote))
	}
	w := newBazelWorkspace(t)
	first := serve()
	if kinds := processes(t, w.mustBazel("build", "--remote_cache=grpc://"+first.Addr, "//...")); kinds["remote cache hit"] != 0 {
		t.Fatalf("a cold build had cache hits: %v", kinds)
	}
	second := serve()
	w.mustBazel("clean")
	assertAllCacheHits(t, w.mustBazel("build", "--remote_cache=grpc://"+second.Addr, "//..."))
	out, err := os.ReadFile(filepath.Join(w.dir, "bazel-bin", "counted.txt"))
	if err != nil || string(out) != "words:\n3\nALPHA\nBETA\nGAMMA\n" {
		t.Fatalf("counted.txt from the cache = %q, %v", out, err)
	}
}
