// Package digest provides Digest, the validated content address used across
// rbs: a lowercase hex SHA-256 hash plus the size of the bytes it names.
//
// A Digest is parsed once at the edge (a gRPC request, a resource name, a
// manifest) and passed by value inside; it is comparable and usable as a map
// key.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// HashLen is the length of a SHA-256 hash in hex characters.
const HashLen = sha256.Size * 2

// Digest names a blob by its SHA-256 hash and size in bytes.
type Digest struct {
	hash string
	size int64
}

// Empty is the digest of zero bytes.
var Empty = FromBytes(nil)

// New validates hash and size and returns the Digest they form.
func New(hash string, size int64) (Digest, error) {
	if len(hash) != HashLen {
		return Digest{}, fmt.Errorf("invalid digest hash %q: want %d lowercase hex characters, got %d", hash, HashLen, len(hash))
	}
	var bad byte
	for i := 0; i < len(hash); i++ {
		bad |= notHex[hash[i]]
	}
	for i := 0; bad != 0; i++ {
		if notHex[hash[i]] != 0 {
			return Digest{}, fmt.Errorf("invalid digest hash %q: character %q is not lowercase hex", hash, hash[i])
		}
	}
	if size < 0 {
		return Digest{}, fmt.Errorf("invalid digest size %d for hash %s: size must not be negative", size, hash)
	}
	return Digest{hash: hash, size: size}, nil
}

// notHex is 1 for each byte that is not a lowercase hex digit: New checks
// a hash by or-ing its bytes' entries, without a branch per byte, as
// FindMissingBlobs of thousands of digests needs.
var notHex = func() (t [256]byte) {
	for i := range t {
		if !('0' <= i && i <= '9' || 'a' <= i && i <= 'f') {
			t[i] = 1
		}
	}
	return t
}()

// FromProto validates a REAPI Digest message.
func FromProto(p *repb.Digest) (Digest, error) {
	if p == nil {
		return Digest{}, fmt.Errorf("missing digest")
	}
	return New(p.GetHash(), p.GetSizeBytes())
}

// Parse reads the "hash/size" form produced by String.
func Parse(s string) (Digest, error) {
	h, sz, ok := strings.Cut(s, "/")
	if !ok {
		return Digest{}, fmt.Errorf("invalid digest %q: want HASH/SIZE", s)
	}
	n, err := strconv.ParseInt(sz, 10, 64)
	if err != nil {
		return Digest{}, fmt.Errorf("invalid digest %q: size %q is not an integer", s, sz)
	}
	return New(h, n)
}

// FromBytes returns the digest of b.
func FromBytes(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest{hash: hex.EncodeToString(sum[:]), size: int64(len(b))}
}

// copyBuffers holds the buffers FromReader hashes through.
var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// FromReader reads r to EOF and returns the digest of what it read.
func FromReader(r io.Reader) (Digest, error) {
	h := sha256.New()
	buf := copyBuffers.Get().(*[]byte)
	// Hide r's WriteTo, which would allocate a buffer of its own.
	n, err := io.CopyBuffer(h, struct{ io.Reader }{r}, *buf)
	copyBuffers.Put(buf)
	if err != nil {
		return Digest{}, err
	}
	return Digest{hash: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// Hash returns the lowercase hex hash.
func (d Digest) Hash() string { return d.hash }

// Size returns the size in bytes.
func (d Digest) Size() int64 { return d.size }

// IsZero reports whether d is the zero Digest (not the digest of empty content).
func (d Digest) IsZero() bool { return d.hash == "" }

// String returns "hash/size".
func (d Digest) String() string { return d.hash + "/" + strconv.FormatInt(d.size, 10) }

// Proto returns d as a REAPI Digest message.
func (d Digest) Proto() *repb.Digest {
	return &repb.Digest{Hash: d.hash, SizeBytes: d.size}
}

// Protos returns ds as REAPI Digest messages, allocated as one block
// rather than one message each: a FindMissingBlobs call names thousands.
func Protos(ds []Digest) []*repb.Digest {
	block := make([]repb.Digest, len(ds))
	out := make([]*repb.Digest, len(ds))
	for i, d := range ds {
		block[i].Hash, block[i].SizeBytes = d.hash, d.size
		out[i] = &block[i]
	}
	return out
}

// Verifier checks that bytes written to it match a digest.
type Verifier struct {
	want Digest
	h    hash.Hash
	n    int64
}

// NewVerifier returns a Verifier expecting want.
func NewVerifier(want Digest) *Verifier { return &Verifier{want: want, h: sha256.New()} }

// Write hashes p and fails as soon as more bytes arrive than the digest's size.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	if v.n > v.want.size {
		return 0, fmt.Errorf("blob %s: received at least %d bytes, more than its size", v.want, v.n)
	}
	return v.h.Write(p)
}

// Written returns how many bytes have been written.
func (v *Verifier) Written() int64 { return v.n }

// Check reports whether everything written matches the expected digest.
func (v *Verifier) Check() error {
	if v.n != v.want.size {
		return fmt.Errorf("blob %s: received %d bytes, want %d", v.want, v.n, v.want.size)
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.hash {
		return fmt.Errorf("blob %s: content hashes to %s", v.want, got)
	}
	return nil
}
