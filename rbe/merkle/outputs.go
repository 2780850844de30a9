package merkle

import (
	"os"
	"sync"
	"syscall"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/gobfile"
)

// hashes remembers file digests by path and file identity (device, inode,
// size, modification time), so a build hashes each unchanged file once, and
// with LoadDigests/SaveDigests not again in the next build.
var hashes sync.Map // string -> hashed

type hashed struct {
	dev, ino, size uint64
	mtime          int64
	d              digest.Digest
}

// savedDigest is a hashed entry as SaveDigests writes it.
type savedDigest struct {
	Path           string
	Dev, Ino, Size uint64
	Mtime          int64
	Hash           string
	DigestSize     int64
}

// LoadDigests remembers the digests saved in file; a missing or unreadable
// file only means files are hashed again.
func LoadDigests(file string) {
	var saved []savedDigest
	if gobfile.Load(file, &saved) != nil {
		return
	}
	for _, e := range saved {
		d, err := digest.New(e.Hash, e.DigestSize)
		if err != nil {
			continue
		}
		hashes.Store(e.Path, hashed{dev: e.Dev, ino: e.Ino, size: e.Size, mtime: e.Mtime, d: d})
	}
}

// SaveDigests writes the remembered digests to file, atomically.
func SaveDigests(file string) error {
	var saved []savedDigest
	hashes.Range(func(k, v any) bool {
		h := v.(hashed)
		saved = append(saved, savedDigest{Path: k.(string), Dev: h.dev, Ino: h.ino, Size: h.size, Mtime: h.mtime, Hash: h.d.Hash(), DigestSize: h.d.Size()})
		return true
	})
	return gobfile.Save(file, saved)
}

// Remember records that the file at abs, as it is now, has digest d: a
// file written from content whose digest is known (an action's output,
// verified as it was written) is never hashed again by HashFile.
func Remember(abs string, d digest.Digest) {
	var st syscall.Stat_t
	if syscall.Stat(abs, &st) == nil && st.Size == d.Size() {
		hashes.Store(abs, hashed{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano(), d: d})
	}
}

// HashFile returns the digest of the file at abs.
func HashFile(abs string) (digest.Digest, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(abs, &st); err != nil {
		return digest.Digest{}, &os.PathError{Op: "stat", Path: abs, Err: err}
	}
	id := hashed{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mtime: st.Mtim.Nano()}
	if v, ok := hashes.Load(abs); ok {
		if h := v.(hashed); h.dev == id.dev && h.ino == id.ino && h.size == id.size && h.mtime == id.mtime {
			return h.d, nil
		}
	}
	f, err := os.Open(abs)
	if err != nil {
		return digest.Digest{}, err
	}
	defer f.Close()
	d, err := digest.FromReader(f)
	if err != nil {
		return digest.Digest{}, err
	}
	id.d = d
	hashes.Store(abs, id)
	return d, nil
}
