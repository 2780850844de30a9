package resource

import (
	"fmt"
	"strings"
	"testing"
)

// The fuzz targets check that no resource name makes the parsers panic, that
// a rejection quotes the name, and that an accepted name's parts rebuild a
// name the parser reads as the same. `go test` runs their seeds;
// `go test -fuzz FuzzParseRead ./rbe/resource` explores further.

const hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

var seeds = []string{
	"blobs/" + hash + "/0",
	"inst/a/blobs/" + hash + "/12",
	"compressed-blobs/zstd/" + hash + "/5",
	"blobs/sha256/" + hash + "/5",
	"uploads/u-1/blobs/" + hash + "/7",
	"i/uploads/u/compressed-blobs/zstd/" + hash + "/7/meta/data",
	"blobs/" + hash + "/-1",
	"blobs/" + hash + "/99999999999999999999",
	"../blobs/" + hash + "/1",
	"blobs//1", "", "/", "uploads", "compressed-blobs/gzip/" + hash + "/1",
}

func checkName(t *testing.T, s string, n Name, err error, rebuild func(Name) string, parse func(string) (Name, error)) {
	t.Helper()
	if err != nil {
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Fatalf("%q: error %q does not quote the name", s, err)
		}
		return
	}
	if n.Digest.IsZero() || n.Digest.Size() < 0 {
		t.Fatalf("%q: accepted with digest %v", s, n.Digest)
	}
	again, err := parse(rebuild(n))
	if err != nil || again != n {
		t.Fatalf("%q parsed as %+v, rebuilt as %q, which reads as %+v, %v", s, n, rebuild(n), again, err)
	}
}

func blobPath(n Name) string {
	p := fmt.Sprintf("blobs/%s/%d", n.Digest.Hash(), n.Digest.Size())
	for name, c := range Compressors {
		if c == n.Compressor {
			p = fmt.Sprintf("compressed-blobs/%s/%s/%d", name, n.Digest.Hash(), n.Digest.Size())
		}
	}
	if n.Instance != "" {
		p = n.Instance + "/" + p
	}
	return p
}

func FuzzParseRead(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseRead(s)
		checkName(t, s, n, err, blobPath, ParseRead)
	})
}

func FuzzParseWrite(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseWrite(s)
		rebuild := func(n Name) string {
			p := "uploads/" + n.UploadID + "/" + strings.TrimPrefix(blobPath(Name{Compressor: n.Compressor, Digest: n.Digest}), "/")
			if n.Instance != "" {
				p = n.Instance + "/" + p
			}
			return p
		}
		checkName(t, s, n, err, rebuild, ParseWrite)
	})
}
