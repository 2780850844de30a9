package blobstore

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// touchInterval bounds how often a blob's modification time is refreshed on
// use: the on-disk LRU order only needs to be roughly right after a restart
// (to the hour), and refreshing on every hit would cost a syscall per blob,
// which a no-op build touching thousands of cached blobs would feel.
const touchInterval = time.Hour

// checkedFor is how long a checked store trusts a blob it found to match
// its key, while its file has not changed since (its change time, which
// any write, truncation, chmod or time update moves, through a hard link
// too): reads then pass its bytes on without hashing them again, as
// Buildbarn's validation caching does. A bit flipped on the disk itself
// leaves the change time alone; it is caught by the first read after.
const checkedFor = 10 * time.Minute

// copyBuffers holds the buffers Put copies through.
var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// Disk is a Store of one file per blob under a directory, named
// "ab/abcd…-SIZE" by the key's hash and size. Writes go to a temporary file
// that is renamed into place only once it is complete (and, behind ContentAddressed,
// verified). Total size is bounded: the least recently used blobs are
// deleted to make room. The LRU order is kept in memory and mirrored in the
// files' modification times, so a restart rebuilds the same order from disk.
type Disk struct {
	dir     string
	tmpDir  string
	maxSize int64 // 0: unbounded
	now     func() time.Time
	mode    os.FileMode // of stored files; 0 keeps the temporary file's 0600
	checked bool        // reads are checked against their keys (WithCheckedReads)

	// mu guards everything below. File system calls that can be slow
	// (writes, removals, time updates) happen outside it.
	mu    sync.Mutex
	lru   *list.List // of *diskEntry; front is most recently used
	index map[digest.Digest]*list.Element
	size  int64
	// unsorted says lru may hold blobs found on disk at the start, not
	// used since, and not yet in the order of their times (sortFound).
	unsorted bool

	evictions atomic.Int64 // blobs evicted since the store was opened
}

type diskEntry struct {
	key  digest.Digest
	size int64 // bytes on disk
	// touched is when it was last used, which its file's modification
	// time keeps; zero for a blob found on disk and not used since, whose
	// time is read from its file once it is needed (see sortFound).
	touched time.Time
	// checked is when its content was last found to match its key, in a
	// checked store, and ctime its file's change time then.
	checked time.Time
	ctime   int64
}

var _ Store = (*Disk)(nil)

// DiskOption configures NewDisk.
type DiskOption func(*Disk)

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) DiskOption { return func(d *Disk) { d.now = now } }

// WithFileMode stores blobs with the given permissions, so that they can be
// hard-linked into place as read-only or executable files.
func WithFileMode(mode os.FileMode) DiskOption { return func(d *Disk) { d.mode = mode } }

// WithCheckedReads makes the store one of content: every Get checks the
// bytes it reads against the key, as they pass. A blob whose file no longer
// hashes to its key (a bit flipped on disk, a file cut short) is removed,
// and the read fails NOT_FOUND instead of passing on the bytes that differ:
// the bytes of a read are withheld from the point where the file ends or
// holds more than the key's size, and the last ones until the hash matches.
// A client then uploads the blob again, or runs again what made it.
func WithCheckedReads() DiskOption { return func(d *Disk) { d.checked = true } }

// NewDisk opens (creating if needed) a disk store in dir holding at most
// maxSize bytes (0 for no bound). Existing blobs are indexed, and evicted
// in the order of their modification times; leftover temporary files are
// removed.
func NewDisk(dir string, maxSize int64, opts ...DiskOption) (*Disk, error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("disk store %s: negative size bound %d", dir, maxSize)
	}
	d := &Disk{
		dir:     dir,
		tmpDir:  filepath.Join(dir, "tmp"),
		maxSize: maxSize,
		now:     time.Now,
		lru:     list.New(),
		index:   map[digest.Digest]*list.Element{},
	}
	for _, o := range opts {
		o(d)
	}
	if err := os.RemoveAll(d.tmpDir); err != nil {
		return nil, fmt.Errorf("disk store %s: clearing temporary files: %w", dir, err)
	}
	if err := os.MkdirAll(d.tmpDir, 0o755); err != nil {
		return nil, fmt.Errorf("disk store: %w", err)
	}
	if err := d.load(); err != nil {
		return nil, fmt.Errorf("disk store %s: %w", dir, err)
	}
	d.mu.Lock()
	victims := d.evictLocked()
	d.mu.Unlock()
	d.remove(victims)
	return d, nil
}

// load indexes the blobs already on disk from their names, which give
// their sizes, without a stat of each: a build opens a store of thousands
// of blobs every time, and most are never evicted. Their order by time is
// worked out before the first eviction (sortFound).
func (d *Disk) load() error {
	shards, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	for _, shard := range shards {
		if !shard.IsDir() || len(shard.Name()) != 2 {
			continue
		}
		files, err := os.ReadDir(filepath.Join(d.dir, shard.Name()))
		if err != nil {
			return err
		}
		for _, f := range files {
			key, ok := parseBlobName(f.Name())
			if !ok || !f.Type().IsRegular() {
				continue
			}
			d.index[key] = d.lru.PushBack(&diskEntry{key: key, size: key.Size()})
			d.size += key.Size()
			d.unsorted = true
		}
	}
	return nil
}

// sortFound puts the blobs found on disk and not used since in the order
// of their files' modification times, the oldest at the back, before
// anything is evicted. It stats them under d.mu, once.
func (d *Disk) sortFound() {
	if !d.unsorted {
		return
	}
	var found []*list.Element
	for el := d.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*diskEntry); e.touched.IsZero() {
			found = append(found, el)
		}
	}
	for _, el := range found {
		e := el.Value.(*diskEntry)
		if info, err := os.Lstat(d.path(e.key)); err == nil {
			e.touched = info.ModTime()
		} else {
			e.touched = time.Unix(0, 1) // gone: the first to go
		}
	}
	sort.Slice(found, func(i, j int) bool {
		return found[i].Value.(*diskEntry).touched.After(found[j].Value.(*diskEntry).touched)
	})
	for _, el := range found {
		d.lru.MoveToBack(el) // the newest first: the oldest ends at the back
	}
	d.unsorted = false
}

func blobName(key digest.Digest) string {
	return key.Hash() + "-" + strconv.FormatInt(key.Size(), 10)
}

func parseBlobName(name string) (digest.Digest, bool) {
	h, s, ok := strings.Cut(name, "-")
	if !ok {
		return digest.Digest{}, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return digest.Digest{}, false
	}
	key, err := digest.New(h, n)
	return key, err == nil
}

func (d *Disk) path(key digest.Digest) string {
	return filepath.Join(d.dir, key.Hash()[:2], blobName(key))
}

// Get implements Store.
func (d *Disk) Get(_ context.Context, key digest.Digest, offset int64) (io.ReadCloser, error) {
	if !d.use(key) {
		return nil, NotFound(key)
	}
	f, err := os.Open(d.path(key))
	if os.IsNotExist(err) {
		// Evicted between the index lookup and the open.
		return nil, NotFound(key)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reading blob %s: %v", key, err)
	}
	if offset == 0 && !d.checked {
		return f, nil
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, status.Errorf(codes.Internal, "reading blob %s: %v", key, err)
	}
	if offset < 0 || offset > info.Size() {
		f.Close()
		return nil, badOffset(key, offset, info.Size())
	}
	if !d.checked || (info.Size() == key.Size() && d.trusted(key, changeTime(info))) {
		if offset == 0 {
			return f, nil
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, status.Errorf(codes.Internal, "reading blob %s: %v", key, err)
		}
		return f, nil
	}
	c := &checkedBlob{f: f, d: d, key: key, v: digest.NewVerifier(key), ctime: changeTime(info)}
	if info.Size() != key.Size() {
		err := c.corrupt(fmt.Errorf("its file holds %d bytes", info.Size()))
		f.Close()
		return nil, err
	}
	// The bytes before the offset are hashed too, for the check at the end.
	if _, err := io.CopyN(io.Discard, c, offset); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// checkedBlob reads a blob's file for a store WithCheckedReads.
type checkedBlob struct {
	f     *os.File
	d     *Disk
	key   digest.Digest
	v     *digest.Verifier
	ctime int64 // of the file when it was opened
	err   error
}

func (c *checkedBlob) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.f.Read(p)
	if n > 0 {
		if _, werr := c.v.Write(p[:n]); werr != nil {
			return 0, c.corrupt(werr)
		}
		if c.v.Written() == c.key.Size() {
			if cerr := c.v.Check(); cerr != nil {
				return 0, c.corrupt(cerr)
			}
			c.d.found(c.key, c.ctime)
		}
	}
	if err == io.EOF && c.v.Written() != c.key.Size() {
		return 0, c.corrupt(c.v.Check())
	}
	if err != nil && err != io.EOF {
		err = status.Errorf(codes.Internal, "reading blob %s: %v", c.key, err)
	}
	return n, err
}

func (c *checkedBlob) Close() error { return c.f.Close() }

// corrupt removes the blob whose file c read, unless a Put has replaced it
// meanwhile, and returns the error of the read: why, as NOT_FOUND.
func (c *checkedBlob) corrupt(why error) error {
	c.err = status.Errorf(codes.NotFound, "blob %s not found: the stored copy was corrupt (%v) and is removed", c.key, why)
	read, err := c.f.Stat()
	if err != nil {
		return c.err
	}
	d, p := c.d, c.d.path(c.key)
	d.mu.Lock()
	defer d.mu.Unlock()
	if now, err := os.Lstat(p); err != nil || !os.SameFile(read, now) {
		return c.err
	}
	if el, ok := d.index[c.key]; ok {
		d.dropLocked(el)
	}
	os.Remove(p)
	return c.err
}

// trusted reports whether key's content was found to match it less than
// checkedFor ago, in a file whose change time is still ctime.
func (d *Disk) trusted(key digest.Digest, ctime int64) bool {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	el, ok := d.index[key]
	if !ok {
		return false
	}
	e := el.Value.(*diskEntry)
	return e.ctime == ctime && !e.checked.IsZero() && now.Sub(e.checked) < checkedFor
}

// found records that key's content, in a file of change time ctime, was
// found to match it just now.
func (d *Disk) found(key digest.Digest, ctime int64) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.index[key]; ok {
		e := el.Value.(*diskEntry)
		e.checked, e.ctime = now, ctime
	}
}

// changeTime is a file's change time, in nanoseconds.
func changeTime(info os.FileInfo) int64 {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	return st.Ctim.Nano()
}

// use marks key as just used and reports whether it is stored.
func (d *Disk) use(key digest.Digest) bool {
	now := d.now()
	d.mu.Lock()
	ok, t := d.useLocked(key, now)
	d.mu.Unlock()
	t.apply(d)
	return ok
}

// touch is a blob's modification time to move from was to now, so that the
// LRU order survives a restart.
type touch struct {
	key      digest.Digest
	was, now time.Time
}

// useLocked marks key as used at now and reports whether it is stored, and
// the time update it is due, if any, which the caller applies once it has
// let go of d.mu.
func (d *Disk) useLocked(key digest.Digest, now time.Time) (bool, touch) {
	el, ok := d.index[key]
	if !ok {
		return false, touch{}
	}
	d.lru.MoveToFront(el)
	e := el.Value.(*diskEntry)
	if now.Sub(e.touched) < touchInterval {
		return true, touch{}
	}
	t := touch{key: key, was: e.touched, now: now}
	e.touched = now
	return true, t
}

// apply updates the file's time, if t is due. In a store for hard links,
// a file whose time is not the recorded one may have been written through a
// link: it keeps its time so that Unchanged sees it. Best effort: a failed
// time update only makes the LRU order after a restart less precise.
func (t touch) apply(d *Disk) {
	if t.now.IsZero() {
		return
	}
	// A blob found on disk and not used since has the time its file has.
	if p := d.path(t.key); d.mode == 0 || t.was.IsZero() || modifiedAt(p, t.was) {
		_ = os.Chtimes(p, t.now, t.now)
	}
}

// modifiedAt reports whether the file at p was last modified at t.
func modifiedAt(p string, t time.Time) bool {
	info, err := os.Lstat(p)
	return err == nil && info.ModTime().Equal(t)
}

// Put implements Store.
func (d *Disk) Put(ctx context.Context, key digest.Digest, r io.Reader) error {
	if d.maxSize > 0 && key.Size() > d.maxSize {
		return status.Errorf(codes.ResourceExhausted, "blob %s is larger than the store's bound of %d bytes", key, d.maxSize)
	}
	tmp, err := os.CreateTemp(d.tmpDir, "put-")
	if errors.Is(err, syscall.ENOSPC) && d.makeRoom(key.Size()) {
		tmp, err = os.CreateTemp(d.tmpDir, "put-")
	}
	if err != nil {
		return storeError(key, err)
	}
	n, err := d.fill(tmp, r, key.Size())
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = storeError(key, cerr)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	final := d.path(key)
	now := d.now()
	if d.mode != 0 {
		if err := os.Chmod(tmp.Name(), d.mode); err != nil {
			os.Remove(tmp.Name())
			return storeError(key, err)
		}
	}
	if err := os.Chtimes(tmp.Name(), now, now); err != nil {
		os.Remove(tmp.Name())
		return storeError(key, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		os.Remove(tmp.Name())
		return storeError(key, err)
	}

	// The rename and the index update happen under the lock so that an
	// eviction of the same key cannot interleave with them.
	d.mu.Lock()
	if err := os.Rename(tmp.Name(), final); err != nil {
		d.mu.Unlock()
		os.Remove(tmp.Name())
		return storeError(key, err)
	}
	var e *diskEntry
	if el, ok := d.index[key]; ok {
		e = el.Value.(*diskEntry)
		d.size += n - e.size
		e.size, e.touched = n, now
		d.lru.MoveToFront(el)
	} else {
		e = &diskEntry{key: key, size: n, touched: now}
		d.index[key] = d.lru.PushFront(e)
		d.size += n
	}
	// Bytes that came through ContentAddressed's check match their key.
	e.checked, e.ctime = time.Time{}, 0
	if d.checked && putChecked(ctx) {
		if info, err := os.Lstat(final); err == nil {
			e.checked, e.ctime = now, changeTime(info)
		}
	}
	victims := d.evictLocked()
	d.mu.Unlock()
	d.remove(victims)
	return nil
}

// fill copies r into f, which is to hold size bytes. When the file system
// is full it evicts least recently used blobs to make room for the rest,
// and fails with RESOURCE_EXHAUSTED only when nothing is left to evict.
// Errors of r are returned as they are.
func (d *Disk) fill(f *os.File, r io.Reader, size int64) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	var n int64
	for {
		m, rerr := r.Read(*buf)
		for p := (*buf)[:m]; len(p) > 0; {
			w, err := f.Write(p)
			p, n = p[w:], n+int64(w)
			if err != nil && !(errors.Is(err, syscall.ENOSPC) && d.makeRoom(max(size-n, int64(len(p))))) {
				return n, storeError(digest.Digest{}, err)
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// storeError turns a file system error into the status a client sees: the
// operation and the cause, never the server's paths. A full disk is
// RESOURCE_EXHAUSTED.
func storeError(key digest.Digest, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	what := "storing a blob"
	if !key.IsZero() {
		what = "storing blob " + key.String()
	}
	if errors.Is(err, syscall.ENOSPC) {
		return status.Errorf(codes.ResourceExhausted, "%s: the server's disk is full and no cached blob is left to evict", what)
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}

// makeRoom evicts least recently used blobs holding at least n bytes, for
// a write the file system refused for want of space. It reports whether it
// evicted anything.
func (d *Disk) makeRoom(n int64) bool {
	var victims []string
	d.mu.Lock()
	d.sortFound()
	for freed := int64(0); freed < max(n, 1) && d.lru.Len() > 0; {
		el := d.lru.Back()
		e := el.Value.(*diskEntry)
		d.dropLocked(el)
		d.evictions.Add(1)
		freed += e.size
		victim := filepath.Join(d.tmpDir, "evict-"+blobName(e.key))
		if err := os.Rename(d.path(e.key), victim); err == nil {
			victims = append(victims, victim)
		}
	}
	d.mu.Unlock()
	d.remove(victims)
	return len(victims) > 0
}

// evictLocked drops least recently used entries from the index until the
// store fits its bound, keeping at least the most recent one, and returns the
// files to delete.
func (d *Disk) evictLocked() []string {
	var victims []string
	if d.maxSize > 0 && d.size > d.maxSize {
		d.sortFound()
	}
	for d.maxSize > 0 && d.size > d.maxSize && d.lru.Len() > 1 {
		el := d.lru.Back()
		e := el.Value.(*diskEntry)
		d.dropLocked(el)
		d.evictions.Add(1)
		// Rename out of the way under the lock so a concurrent Put of the
		// same key cannot be deleted by this eviction.
		victim := filepath.Join(d.tmpDir, "evict-"+blobName(e.key))
		if err := os.Rename(d.path(e.key), victim); err == nil {
			victims = append(victims, victim)
		}
	}
	return victims
}

// dropLocked takes the entry el out of the index; its file is the
// caller's to remove.
func (d *Disk) dropLocked(el *list.Element) {
	e := el.Value.(*diskEntry)
	d.lru.Remove(el)
	delete(d.index, e.key)
	d.size -= e.size
}

func (d *Disk) remove(paths []string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// Link makes dst a hard link to the stored blob key, falling back to a copy
// where a link is impossible (another file system, too many links). It
// returns a NotFound error when the blob is absent, or was written to
// through an earlier link (see Unchanged), which drops it.
func (d *Disk) Link(key digest.Digest, dst string) error {
	if !d.use(key) {
		return NotFound(key)
	}
	if ok, err := d.Unchanged(key); err != nil || !ok {
		if err == nil {
			err = NotFound(key)
		}
		return err
	}
	// Under the lock, an eviction cannot remove the file between the
	// lookup and the link.
	d.mu.Lock()
	_, ok := d.index[key]
	var err error
	if ok {
		err = os.Link(d.path(key), dst)
	}
	d.mu.Unlock()
	if !ok {
		return NotFound(key)
	}
	if err == nil {
		return nil
	}
	rc, gerr := d.Get(context.Background(), key, 0)
	if gerr != nil {
		return gerr
	}
	defer rc.Close()
	mode := d.mode
	if mode == 0 {
		mode = 0o644
	}
	f, ferr := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if ferr != nil {
		return ferr
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Unchanged reports whether the file of the stored blob key still holds the
// content it was stored with. It is for stores whose files are hard-linked
// into place (Link), where a program that writes to its link, or changes its
// mode, changes the stored file. A file whose size, mode (WithFileMode) or
// modification time differs from the store's record is hashed again: if its
// content still has its digest, its mode is restored and it is kept;
// otherwise it is dropped from the store and Unchanged returns false. A blob
// that is not stored is unchanged.
func (d *Disk) Unchanged(key digest.Digest) (bool, error) {
	p := d.path(key)
	d.mu.Lock()
	el, ok := d.index[key]
	var want time.Time
	if ok {
		want = el.Value.(*diskEntry).touched
	}
	d.mu.Unlock()
	if !ok {
		return true, nil
	}
	info, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return true, nil // evicted meanwhile
	}
	if err != nil {
		return false, status.Errorf(codes.Internal, "checking blob %s: %v", key, err)
	}
	if want.IsZero() {
		want = info.ModTime() // found on disk and not used since: as its file says
	}
	if info.Size() == key.Size() && (d.mode == 0 || info.Mode().Perm() == d.mode) && info.ModTime().Equal(want) {
		return true, nil
	}
	intact, err := hasDigest(p, key)
	if err != nil {
		return false, status.Errorf(codes.Internal, "checking blob %s: %v", key, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now, err := os.Lstat(p)
	if err != nil || !os.SameFile(info, now) || d.index[key] != el {
		return true, nil // evicted, or replaced by a Put, meanwhile
	}
	e := el.Value.(*diskEntry)
	if intact {
		if d.mode != 0 && now.Mode().Perm() != d.mode {
			if err := os.Chmod(p, d.mode); err != nil {
				return false, status.Errorf(codes.Internal, "restoring the mode of blob %s: %v", key, err)
			}
		}
		e.touched = now.ModTime()
		return true, nil
	}
	d.dropLocked(el)
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return false, status.Errorf(codes.Internal, "dropping changed blob %s: %v", key, err)
	}
	return false, nil
}

// hasDigest reports whether the file at p holds the content of key.
func hasDigest(p string, key digest.Digest) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer f.Close()
	got, err := digest.FromReader(f)
	return got == key, err
}

// FindMissing implements Store. It takes the lock once for the whole
// batch, not once per digest: a build asks about thousands at a time.
func (d *Disk) FindMissing(_ context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	var missing []digest.Digest
	var touches []touch
	now := d.now()
	d.mu.Lock()
	for _, key := range ds {
		ok, t := d.useLocked(key, now)
		if !ok {
			missing = append(missing, key)
		} else if !t.now.IsZero() {
			touches = append(touches, t)
		}
	}
	d.mu.Unlock()
	for _, t := range touches {
		t.apply(d)
	}
	return missing, nil
}

// Evictions returns how many blobs were evicted since the store was
// opened, to keep it within its bound or to make room on a full disk.
func (d *Disk) Evictions() int64 { return d.evictions.Load() }

// Size returns the bytes currently stored.
func (d *Disk) Size() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.size
}
