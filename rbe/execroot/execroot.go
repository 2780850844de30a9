// Package execroot lays out the directory a command runs in and reads back
// what the command left there, for local actions, worker actions and batch
// jobs alike.
//
// A Cache is a local CAS that keeps each blob as a read-only file, in two
// stores by mode, so that staged inputs are hard links into it; a Source
// (CASSource, FileSource) supplies the blobs it lacks. A Tree is an input
// root as Directory messages; Cache.Stage checks it with merkle.CheckTree
// before laying it out, and the Staged it returns tells afterwards whether
// the command wrote to an input through its link. A Root finds outputs in
// the directory under a symlink policy (Links) that keeps every lookup
// inside it, and records each as an Output: a file, a directory with its
// contents, or a symlink, kept as a symlink. A Result turns outputs into a
// REAPI ActionResult and the blobs it references.
package execroot

import (
	"context"
	"io"
	"path/filepath"
	"sync"

	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cache is a local CAS whose blobs are read-only files, kept twice over by
// mode, 0444 and 0555, so that an input is a hard link into the store of
// its mode and a repeated input costs no transfer and no copy.
type Cache struct {
	plain, exe *blobstore.Disk
}

// OpenCache opens (creating if needed) the cache in dir, bounded by about
// maxSize bytes, half for each store (0 for no bound).
func OpenCache(dir string, maxSize int64) (*Cache, error) {
	plain, err := blobstore.NewDisk(filepath.Join(dir, "r"), maxSize/2, blobstore.WithFileMode(0o444))
	if err != nil {
		return nil, err
	}
	exe, err := blobstore.NewDisk(filepath.Join(dir, "x"), maxSize/2, blobstore.WithFileMode(0o555))
	if err != nil {
		return nil, err
	}
	return &Cache{plain: plain, exe: exe}, nil
}

// Store returns the store of executable or of plain files.
func (c *Cache) Store(executable bool) *blobstore.Disk {
	if executable {
		return c.exe
	}
	return c.plain
}

// key is one blob in one store of the cache.
type key struct {
	Digest     digest.Digest
	Executable bool
}

// A Source supplies the blobs a Cache lacks.
type Source interface {
	// Fetch reads each blob of ds (none empty, none twice) and hands its
	// content to put, which may be called from several goroutines at once.
	// The content must have its digest: a source that cannot vouch for it
	// fails the reader instead. A blob the source lacks is a NotFound
	// error.
	Fetch(ctx context.Context, ds []digest.Digest, put func(digest.Digest, io.Reader) error) error
}

// fill puts into the cache the blobs of keys it lacks, from src. A blob too
// large for its store is left out and returned among tooLarge: staging
// copies it from src instead.
func (c *Cache) fill(ctx context.Context, src Source, keys []key) (tooLarge map[digest.Digest]bool, err error) {
	var ds []digest.Digest
	modes := map[digest.Digest][]bool{}
	seen := map[key]bool{}
	for _, k := range keys {
		if k.Digest.Size() == 0 || seen[k] {
			continue
		}
		seen[k] = true
		missing, err := c.Store(k.Executable).FindMissing(ctx, []digest.Digest{k.Digest})
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			continue
		}
		if modes[k.Digest] == nil {
			ds = append(ds, k.Digest)
		}
		modes[k.Digest] = append(modes[k.Digest], k.Executable)
	}
	if len(ds) == 0 {
		return nil, nil
	}
	var mu sync.Mutex
	tooLarge = map[digest.Digest]bool{}
	err = src.Fetch(ctx, ds, func(d digest.Digest, r io.Reader) error {
		ms := modes[d]
		first := c.Store(ms[0])
		err := first.Put(ctx, d, r)
		if status.Code(err) == codes.ResourceExhausted {
			mu.Lock()
			tooLarge[d] = true
			mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		// The other mode's copy is made from the first.
		for _, exec := range ms[1:] {
			rc, err := first.Get(ctx, d, 0)
			if blobstore.IsNotFound(err) {
				return nil // evicted already: fetched again when staged
			}
			if err != nil {
				return err
			}
			err = c.Store(exec).Put(ctx, d, rc)
			rc.Close()
			if err != nil && status.Code(err) != codes.ResourceExhausted {
				return err
			}
		}
		return nil
	})
	return tooLarge, err
}
