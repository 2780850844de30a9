package merkle

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/gobfile"
	"github.com/rbs-build/rbs/rbe/packed"
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

// savedDigests is the table of remembered digests as SaveDigests writes
// it: packed, its paths sorted, each entry its path, file identity, hash
// and size.
type savedDigests map[string]hashed

// digestsVersion starts a saved table.
const digestsVersion = 1

func (t savedDigests) MarshalBinary() ([]byte, error) {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var w packed.Writer
	w.Uvarint(digestsVersion)
	w.Uvarint(uint64(len(paths)))
	var ns packed.Names
	for _, p := range paths {
		h := t[p]
		w.Name(&ns, p)
		w.Uvarint(h.dev)
		w.Uvarint(h.ino)
		w.Uvarint(h.size)
		w.Varint(h.mtime)
		w.String(h.d.Hash())
		w.Varint(h.d.Size())
	}
	return w.B, nil
}

func (t *savedDigests) UnmarshalBinary(b []byte) error {
	r := packed.Reader{B: b}
	if v := r.Uvarint(); v != digestsVersion {
		return fmt.Errorf("digests: version %d, want %d", v, digestsVersion)
	}
	n := r.Count(8)
	*t = make(savedDigests, n)
	for range n {
		p := r.Name()
		h := hashed{dev: r.Uvarint(), ino: r.Uvarint(), size: r.Uvarint(), mtime: r.Varint()}
		hash, size := r.String(), r.Varint()
		if r.Err != nil {
			break
		}
		d, err := digest.New(hash, size)
		if err != nil {
			return err
		}
		h.d = d
		(*t)[p] = h
	}
	return r.End()
}

// LoadDigests remembers the digests saved in file; a missing or unreadable
// file only means files are hashed again.
func LoadDigests(file string) {
	var saved savedDigests
	if gobfile.Load(file, &saved) != nil {
		return
	}
	for p, h := range saved {
		hashes.Store(p, h)
	}
}

// SaveDigests writes the remembered digests to file, atomically.
func SaveDigests(file string) error {
	saved := savedDigests{}
	hashes.Range(func(k, v any) bool {
		saved[k.(string)] = v.(hashed)
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
	d, err := Hash(abs)
	if err != nil {
		return digest.Digest{}, err
	}
	id.d = d
	hashes.Store(abs, id)
	return d, nil
}

// Hash returns the digest of the file at abs, hashed now and not
// remembered: for the files of a scratch directory, which are never seen
// again, and which HashFile would remember for the life of the process.
func Hash(abs string) (digest.Digest, error) {
	f, err := os.Open(abs)
	if err != nil {
		return digest.Digest{}, err
	}
	defer f.Close()
	return digest.FromReader(f)
}
