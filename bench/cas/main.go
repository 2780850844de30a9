// Command cas benchmarks rbs's CAS over gRPC on loopback: ByteStream upload
// and download throughput for 1 MiB and 256 MiB blobs, and the latency of
// FindMissingBlobs for 10,000 digests. Each figure is printed beside a plain
// loopback TCP copy of the same bytes measured in the same run (the physical
// ceiling), and as a ratio to it.
//
// The server is a real `rbs remote serve` (built from ./cmd/rbs) with its
// default disk CAS, in a process of its own, as a cluster runs it; the
// client uploads blobs from files and reads them into io.Discard, as a
// build's client does, so that neither side holds the benchmark's bytes in
// its heap.
//
//	go run ./bench/cas [-big 256MiB] [-small-count 64]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc"
)

func main() {
	big := units.Size(256 << 20)
	flag.TextVar(&big, "big", &big, "size of the large blob")
	smallCount := flag.Int("small-count", 64, "number of 1 MiB blobs per measurement")
	findCount := flag.Int("find-count", 10000, "digests per FindMissingBlobs call")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	rbsBin := flag.String("rbs", "", "the rbs binary to serve with (default: built from ./cmd/rbs)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	dir, err := os.MkdirTemp("", "rbs-bench-cas-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	addr, stop := startServer(dir, *rbsBin)
	defer stop()
	conn, err := client.Dial(client.Options{Target: addr})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	cas := client.NewCAS(conn, "")
	peer := newLoopback()
	defer peer.close()

	fmt.Printf("%-34s %14s %14s %8s\n", "measurement", "rbs", "loopback copy", "ratio")
	for _, size := range []int64{1 << 20, int64(big)} {
		count := *smallCount
		if size > 1<<20 {
			count = 1
		}
		blobs := make([]client.Blob, count)
		for i := range blobs {
			blobs[i] = blobFile(dir, size)
		}
		total := size * int64(count)
		label := units.Size(size).String()

		up := timeIt(func() {
			for _, b := range blobs {
				if err := cas.Write(context.Background(), b); err != nil {
					log.Fatal(err)
				}
			}
		})
		upPeer := timeIt(func() {
			for range blobs {
				peer.send(size)
			}
		})
		report(fmt.Sprintf("ByteStream upload %s x%d", label, count), throughput(total, up), throughput(total, upPeer), upPeer, up)

		down := timeIt(func() {
			for _, b := range blobs {
				if err := cas.Read(context.Background(), b.Digest, io.Discard); err != nil {
					log.Fatal(err)
				}
			}
		})
		downPeer := timeIt(func() {
			for range blobs {
				peer.receive(size)
			}
		})
		report(fmt.Sprintf("ByteStream download %s x%d", label, count), throughput(total, down), throughput(total, downPeer), downPeer, down)

		// What a CAS cannot skip, against the same ceiling: hashing the
		// bytes (a server verifies every upload, a client every download)
		// and writing them to new files (a disk store's upload).
		data := make([]byte, size)
		rand.Read(data)
		hash := timeIt(func() {
			for range blobs {
				digest.FromBytes(data)
			}
		})
		report(fmt.Sprintf("  SHA-256 of %s x%d alone", label, count), throughput(total, hash), throughput(total, upPeer), upPeer, hash)
		files := timeIt(func() {
			for i := range blobs {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("new-", size, "-", i)), data, 0o644); err != nil {
					log.Fatal(err)
				}
			}
		})
		report(fmt.Sprintf("  writing %s x%d to new files", label, count), throughput(total, files), throughput(total, upPeer), upPeer, files)
	}

	findMissing(cas, conn, peer, *findCount)
}

func findMissing(cas *client.CAS, conn *grpc.ClientConn, peer *loopback, n int) {
	ds := make([]digest.Digest, n)
	for i := range ds {
		ds[i] = digest.FromBytes([]byte(fmt.Sprint("find-missing-", i)))
	}
	// Half of them present, so the answer is not trivial.
	var present []client.Blob
	for i := 0; i < n; i += 2 {
		present = append(present, client.Blob{Digest: ds[i], Data: []byte(fmt.Sprint("find-missing-", i))})
	}
	if _, _, err := cas.Upload(context.Background(), present); err != nil {
		log.Fatal(err)
	}
	var reqBytes int
	for _, d := range ds {
		reqBytes += len(d.Hash()) + 12 // hash, size varint and field tags
	}
	var rbs, copies []time.Duration
	for i := 0; i < 9; i++ {
		rbs = append(rbs, timeIt(func() {
			missing, err := cas.FindMissing(context.Background(), ds)
			if err != nil || len(missing) != n/2 {
				log.Fatalf("FindMissing: %d missing, %v", len(missing), err)
			}
		}))
		copies = append(copies, timeIt(func() { peer.roundTrip(reqBytes, reqBytes/2) }))
	}
	r, c := median(rbs), median(copies)
	report(fmt.Sprintf("FindMissingBlobs %d digests (p50)", n), r.String(), c.String(), c, r)
}

// startServer starts `rbs remote serve` of the binary bin (when "", one
// built from ./cmd/rbs) on loopback with its data in dir, and returns its
// address and how to stop it.
func startServer(dir, bin string) (addr string, stop func()) {
	if bin == "" {
		bin = filepath.Join(dir, "rbs")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/rbs").CombinedOutput(); err != nil {
			log.Fatalf("building rbs (run from the repository's root): %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	listening := regexp.MustCompile(`listening on (\S+)`)
	for addr == "" && lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		log.Fatalf("rbs remote serve ended without listening: %v", cmd.Wait())
	}
	go io.Copy(io.Discard, stderr)
	return addr, func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
}

// blobFile writes size random bytes to a file in dir and returns them as a
// blob to upload from the file.
func blobFile(dir string, size int64) client.Blob {
	f, err := os.CreateTemp(dir, "blob-")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		log.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		log.Fatal(err)
	}
	d, err := digest.FromReader(f)
	if err != nil {
		log.Fatal(err)
	}
	name := f.Name()
	return client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return os.Open(name) }}
}

func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func throughput(n int64, d time.Duration) string {
	return fmt.Sprintf("%.0f MiB/s", float64(n)/(1<<20)/d.Seconds())
}

// report prints a row; ratio is the peer's time over rbs's, so 1.0 means rbs
// runs at the loopback ceiling.
func report(name, rbs, peer string, peerTime, rbsTime time.Duration) {
	fmt.Printf("%-34s %14s %14s %8.2f\n", name, rbs, peer, peerTime.Seconds()/rbsTime.Seconds())
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// loopback is a plain TCP connection pair on 127.0.0.1 used as the ceiling.
type loopback struct {
	client, server net.Conn
	buf            []byte
}

func newLoopback() *loopback {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			log.Fatal(err)
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	return &loopback{client: c, server: <-accepted, buf: make([]byte, 1<<20)}
}

// send copies n bytes from client to server.
func (l *loopback) send(n int64) {
	done := make(chan struct{})
	go func() {
		io.CopyN(io.Discard, l.server, n)
		close(done)
	}()
	for left := n; left > 0; {
		k := min(left, int64(len(l.buf)))
		if _, err := l.client.Write(l.buf[:k]); err != nil {
			log.Fatal(err)
		}
		left -= k
	}
	<-done
}

// receive copies n bytes from server to client.
func (l *loopback) receive(n int64) {
	go func() {
		for left := n; left > 0; {
			k := min(left, int64(len(l.buf)))
			if _, err := l.server.Write(l.buf[:k]); err != nil {
				log.Fatal(err)
			}
			left -= k
		}
	}()
	if _, err := io.CopyN(io.Discard, l.client, n); err != nil {
		log.Fatal(err)
	}
}

// roundTrip sends req bytes and reads resp bytes back.
func (l *loopback) roundTrip(req, resp int) {
	go func() {
		io.CopyN(io.Discard, l.server, int64(req))
		l.server.Write(make([]byte, resp))
	}()
	l.client.Write(make([]byte, req))
	io.CopyN(io.Discard, l.client, int64(resp))
}

func (l *loopback) close() {
	l.client.Close()
	l.server.Close()
}
