package resource

import (
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

const h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestParseRead(t *testing.T) {
	tests := []struct {
		in         string
		instance   string
		compressor repb.Compressor_Value
		size       int64
	}{
		{"blobs/" + h + "/0", "", repb.Compressor_IDENTITY, 0},
		{"main/blobs/" + h + "/12", "main", repb.Compressor_IDENTITY, 12},
		{"a/b/c/blobs/sha256/" + h + "/5", "a/b/c", repb.Compressor_IDENTITY, 5},
		{"compressed-blobs/zstd/" + h + "/7", "", repb.Compressor_ZSTD, 7},
	}
	for _, tt := range tests {
		n, err := ParseRead(tt.in)
		if err != nil {
			t.Errorf("ParseRead(%q): %v", tt.in, err)
			continue
		}
		if n.Instance != tt.instance || n.Compressor != tt.compressor || n.Digest.Hash() != h || n.Digest.Size() != tt.size {
			t.Errorf("ParseRead(%q) = %+v", tt.in, n)
		}
	}
}

func TestParseWrite(t *testing.T) {
	tests := []struct {
		in       string
		instance string
		upload   string
		comp     repb.Compressor_Value
	}{
		{"uploads/u1/blobs/" + h + "/3", "", "u1", repb.Compressor_IDENTITY},
		{"inst/uploads/u2/blobs/" + h + "/3/some/metadata", "inst", "u2", repb.Compressor_IDENTITY},
		{"uploads/u3/compressed-blobs/zstd/" + h + "/3", "", "u3", repb.Compressor_ZSTD},
	}
	for _, tt := range tests {
		n, err := ParseWrite(tt.in)
		if err != nil {
			t.Errorf("ParseWrite(%q): %v", tt.in, err)
			continue
		}
		if n.Instance != tt.instance || n.UploadID != tt.upload || n.Compressor != tt.comp || n.Digest.Size() != 3 {
			t.Errorf("ParseWrite(%q) = %+v", tt.in, n)
		}
	}
}

func TestBadNames(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		write bool
		want  string
	}{
		{"wrong hash length", "blobs/abc123/3", false, "want 64"},
		{"uppercase hash", "blobs/" + strings.ToUpper(h) + "/3", false, "not lowercase hex"},
		{"negative size", "blobs/" + h + "/-1", false, "must not be negative"},
		{"size not a number", "blobs/" + h + "/ten", false, "not an integer"},
		{"missing size", "blobs/" + h, false, "HASH/SIZE"},
		{"trailing segments on read", "blobs/" + h + "/3/extra", false, "unexpected"},
		{"path traversal in instance", "../../etc/blobs/" + h + "/3", false, `".." is not allowed`},
		{"dot segment", "a/./blobs/" + h + "/3", false, `"." is not allowed`},
		{"empty segment", "a//blobs/" + h + "/3", false, "empty path segment"},
		{"path traversal in upload id", "uploads/../blobs/" + h + "/3", true, `".." is not allowed`},
		{"unknown compressor", "compressed-blobs/lz4/" + h + "/3", false, `unsupported compressor "lz4"`},
		{"identity is not a compressor", "compressed-blobs/identity/" + h + "/3", false, "unsupported compressor"},
		{"unsupported digest function", "blobs/blake3/" + h + "/3", false, "unsupported digest function"},
		{"no blobs segment", "foo/bar", false, "no blobs"},
		{"read name used for write", "blobs/" + h + "/3", true, "want uploads"},
		{"upload name used for read", "uploads/u/blobs/" + h + "/3", false, "want blobs"},
		{"missing upload id", "uploads", true, "missing upload id"},
		{"empty", "", false, "empty path segment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.write {
				_, err = ParseWrite(tt.in)
			} else {
				_, err = ParseRead(tt.in)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parse %q: error %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}
