package blobstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) advance()       { c.t = c.t.Add(2 * touchInterval) }

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func blob(s string) (digest.Digest, []byte) { return digest.FromBytes([]byte(s)), []byte(s) }

func stores(t *testing.T) map[string]Store {
	disk, err := NewDisk(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	residentDisk, err := NewDisk(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := NewDisk(t.TempDir(), 0, WithCheckedReads())
	if err != nil {
		t.Fatal(err)
	}
	// Resident: blobs of up to 8 bytes from memory, larger ones from disk.
	return map[string]Store{"memory": NewMemory(), "disk": disk, "checked disk": checked, "resident disk": NewResident(residentDisk, 8, 1<<20)}
}

func TestStoreContract(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) { testContract(t, s) })
	}
}

// testContract checks what every backend does: NotFound for an absent
// blob, reads from offsets up to the end, OutOfRange past it, and an exact
// FindMissing.
func testContract(t *testing.T, s Store) {
	ctx := context.Background()
	d, b := blob("0123456789")
	absent, _ := blob("absent")
	if _, err := s.Get(ctx, d, 0); status.Code(err) != codes.NotFound {
		t.Fatalf("Get before Put: %v, want NotFound", err)
	}
	if err := PutBytes(ctx, s, d, b); err != nil {
		t.Fatal(err)
	}
	got, err := GetBytes(ctx, s, d)
	if err != nil || string(got) != string(b) {
		t.Fatalf("GetBytes = %q, %v", got, err)
	}
	for _, tc := range []struct {
		offset int64
		want   string
		code   codes.Code
	}{{0, "0123456789", codes.OK}, {4, "456789", codes.OK}, {10, "", codes.OK}, {11, "", codes.OutOfRange}, {-1, "", codes.OutOfRange}} {
		rc, err := s.Get(ctx, d, tc.offset)
		if status.Code(err) != tc.code {
			t.Fatalf("Get offset %d: %v, want %v", tc.offset, err, tc.code)
		}
		if err == nil {
			got, _ := io.ReadAll(rc)
			rc.Close()
			if string(got) != tc.want {
				t.Fatalf("Get offset %d = %q, want %q", tc.offset, got, tc.want)
			}
		}
	}
	missing, err := s.FindMissing(ctx, []digest.Digest{d, absent})
	if err != nil || len(missing) != 1 || missing[0] != absent {
		t.Fatalf("FindMissing = %v, %v; want [%v]", missing, err, absent)
	}
}

func TestContentAddressedRejectsCorruptBlobs(t *testing.T) {
	for name, backend := range stores(t) {
		t.Run(name, func(t *testing.T) { testContentAddressed(t, backend) })
	}
}

// testContentAddressed checks ContentAddressed over a backend: bytes that
// do not match their digest never become visible, and the empty blob is
// always present.
func testContentAddressed(t *testing.T, backend Store) {
	ctx := context.Background()
	s := ContentAddressed(backend)
	d, _ := blob("hello")
	for _, bad := range []string{"jello", "hell", "hello!"} {
		err := s.Put(ctx, d, strings.NewReader(bad))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Put(%q) = %v, want InvalidArgument", bad, err)
		}
		if missing, _ := s.FindMissing(ctx, []digest.Digest{d}); len(missing) != 1 {
			t.Fatalf("corrupt blob %q became visible", bad)
		}
	}
	if err := s.Put(ctx, d, strings.NewReader("hello")); err != nil {
		t.Fatalf("Put of matching bytes: %v", err)
	}
	if missing, _ := s.FindMissing(ctx, []digest.Digest{digest.Empty}); len(missing) != 0 {
		t.Fatal("the empty blob is reported missing")
	}
	if b, err := GetBytes(ctx, s, digest.Empty); err != nil || len(b) != 0 {
		t.Fatalf("GetBytes(empty) = %q, %v", b, err)
	}
}

// A CAS disk store's blob whose file changed on disk is never read back
// whole: the read fails NOT_FOUND, the blob is removed, and a Put stores
// it again. Small reads, from an offset too, return none of the bytes.
func TestDiskCheckedReadsRemoveCorruptBlobs(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: read in chunks
	tests := []struct {
		name    string
		content string
		offset  int64
		damage  func(p string) error
	}{
		{"a flipped byte", "some content", 0, func(p string) error { return flipByte(p, 3) }},
		{"a flipped byte before the offset", "some content", 5, func(p string) error { return flipByte(p, 2) }},
		{"a flipped last byte of a large blob", big, 0, func(p string) error { return flipByte(p, int64(len(big)-1)) }},
		{"cut short", "some content", 0, func(p string) error { return os.Truncate(p, 4) }},
		{"bytes appended", "some content", 0, func(p string) error { return writeTo(p, os.O_APPEND|os.O_WRONLY, "more") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			disk, err := NewDisk(t.TempDir(), 0, WithCheckedReads())
			if err != nil {
				t.Fatal(err)
			}
			d, b := blob(tt.content)
			if err := PutBytes(ctx, disk, d, b); err != nil {
				t.Fatal(err)
			}
			p := disk.path(d)
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tt.damage(p); err != nil {
				t.Fatal(err)
			}
			rc, err := disk.Get(ctx, d, tt.offset)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(rc)
				rc.Close()
			}
			if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("reading the damaged blob: %v; want NOT_FOUND saying it was corrupt", err)
			}
			if int64(len(got)) >= d.Size()-tt.offset {
				t.Fatalf("the read passed on all %d bytes", len(got))
			}
			if len(tt.content) < 1<<10 && len(got) != 0 {
				t.Fatalf("a small read passed on %q", got)
			}
			if missing, _ := disk.FindMissing(ctx, []digest.Digest{d}); len(missing) != 1 || disk.Size() != 0 {
				t.Fatalf("the damaged blob is still stored (missing %v, size %d)", missing, disk.Size())
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("its file is still there: %v", err)
			}
			if err := PutBytes(ctx, disk, d, b); err != nil {
				t.Fatal(err)
			}
			if again, err := GetBytes(ctx, disk, d); err != nil || string(again) != tt.content {
				t.Fatalf("after a new Put: %d bytes, %v", len(again), err)
			}
		})
	}
}

// flipByte inverts the bits of the byte at offset in the file p.
func flipByte(p string, offset int64) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, offset); err != nil {
		return err
	}
	b[0] ^= 0xff
	_, err = f.WriteAt(b, offset)
	return err
}

func TestDiskLeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	disk, err := NewDisk(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := blob("hello")
	if err := ContentAddressed(disk).Put(context.Background(), d, strings.NewReader("jello")); err == nil {
		t.Fatal("corrupt Put succeeded")
	}
	left, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	if len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
	if _, err := os.Stat(disk.path(d)); !os.IsNotExist(err) {
		t.Fatalf("corrupt blob on disk: %v", err)
	}
}

// fill stores n blobs of 10 bytes each, named by prefix, advancing the
// clock between them.
func fill(t *testing.T, s Store, clock *fakeClock, prefix string, n int) []digest.Digest {
	var ds []digest.Digest
	for i := 0; i < n; i++ {
		d, b := blob(fmt.Sprintf("%s-%08d", prefix, i))
		if err := PutBytes(context.Background(), s, d, b); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		clock.advance()
	}
	return ds
}

func present(t *testing.T, s Store, ds []digest.Digest) []bool {
	t.Helper()
	out := make([]bool, len(ds))
	for i, d := range ds {
		// Checked through the index without counting as a use.
		_, err := os.Stat(s.(*Disk).path(d))
		out[i] = err == nil
	}
	return out
}

func TestDiskEvictsLeastRecentlyUsed(t *testing.T) {
	clock := newClock()
	disk, err := NewDisk(t.TempDir(), 30, WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	ds := fill(t, disk, clock, "a", 3) // 30 bytes: full
	// Use the oldest blob; the second becomes least recently used.
	if _, err := GetBytes(context.Background(), disk, ds[0]); err != nil {
		t.Fatal(err)
	}
	clock.advance()
	ds = append(ds, fill(t, disk, clock, "b", 1)...)
	want := []bool{true, false, true, true}
	if got := present(t, disk, ds); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("present after eviction = %v, want %v", got, want)
	}
	if disk.Size() != 30 {
		t.Fatalf("Size = %d, want 30", disk.Size())
	}
	// FindMissing counts as a use too.
	if _, err := disk.FindMissing(context.Background(), ds[2:3]); err != nil {
		t.Fatal(err)
	}
	clock.advance()
	d, b := blob("newest-bl!")
	if err := PutBytes(context.Background(), disk, d, b); err != nil {
		t.Fatal(err)
	}
	want = []bool{false, false, true, true}
	if got := present(t, disk, ds); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("present after second eviction = %v, want %v", got, want)
	}
}

func TestDiskRejectsBlobLargerThanBound(t *testing.T) {
	disk, err := NewDisk(t.TempDir(), 4)
	if err != nil {
		t.Fatal(err)
	}
	d, b := blob("too large")
	if err := PutBytes(context.Background(), disk, d, b); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Put = %v, want ResourceExhausted", err)
	}
}

func TestDiskRestartKeepsBlobsAndOrder(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	disk, err := NewDisk(dir, 40, WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	ds := fill(t, disk, clock, "a", 3)
	if _, err := GetBytes(context.Background(), disk, ds[0]); err != nil {
		t.Fatal(err)
	}
	clock.advance()
	// A stray temporary file, as a crash mid-write would leave.
	if err := os.WriteFile(filepath.Join(dir, "tmp", "put-123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}

	reopened, err := NewDisk(dir, 30, WithClock(clock.now))
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Size() != 30 {
		t.Fatalf("Size after restart = %d, want 30", reopened.Size())
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("temporary files survived restart: %v", left)
	}
	got, err := GetBytes(context.Background(), reopened, ds[2])
	if err != nil || digest.FromBytes(got) != ds[2] {
		t.Fatalf("blob after restart: %q, %v", got, err)
	}
	clock.advance()
	// Two more blobs force two evictions: ds[1] (least recently used
	// before the restart), then ds[0].
	more := fill(t, reopened, clock, "b", 2)
	want := []bool{false, false, true, true, true}
	if got := present(t, reopened, append(ds, more...)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("present = %v, want %v", got, want)
	}
}

func TestDiskLinkAndFileMode(t *testing.T) {
	dir := t.TempDir()
	disk, err := NewDisk(filepath.Join(dir, "cache"), 0, WithFileMode(0o555))
	if err != nil {
		t.Fatal(err)
	}
	d, b := blob("#!/bin/sh\n")
	if err := PutBytes(context.Background(), disk, d, b); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "linked")
	if err := disk.Link(d, dst); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dst)
	if err != nil || info.Mode().Perm() != 0o555 {
		t.Fatalf("linked file: %v, %v; want mode 0555", info, err)
	}
	absent, _ := blob("absent")
	if err := disk.Link(absent, filepath.Join(dir, "x")); status.Code(err) != codes.NotFound {
		t.Fatalf("Link of absent blob: %v", err)
	}
}

// A program that writes to an input hard-linked from the store writes to the
// stored file: Unchanged and Link find that out, drop the blob if its content
// changed, and repair it if only its mode or time did.
func TestDiskLinkedFileWrittenInPlace(t *testing.T) {
	d, b := blob("stored content\n")
	for _, tc := range []struct {
		name    string
		change  func(p string) error
		advance bool // a use after touchInterval, which refreshes the time
		kept    bool
	}{
		{name: "untouched", change: func(string) error { return nil }, kept: true},
		{name: "appended", change: func(p string) error { return writeTo(p, os.O_APPEND, "more\n") }},
		{name: "overwritten at the same size", change: func(p string) error { return writeTo(p, 0, strings.ToUpper(string(b))) }},
		{name: "truncated", change: func(p string) error { return writeTo(p, os.O_TRUNC, "") }},
		{name: "overwritten with its size and mode kept, then used an hour later", change: func(p string) error {
			if err := writeTo(p, 0, strings.ToUpper(string(b))); err != nil {
				return err
			}
			return os.Chmod(p, 0o444)
		}, advance: true},
		{name: "mode changed", change: func(p string) error { return os.Chmod(p, 0o755) }, kept: true},
		{name: "time changed", change: func(p string) error {
			return os.Chtimes(p, time.Unix(1e9, 0), time.Unix(1e9, 0))
		}, kept: true},
	} {
		// Reopened, the store knows the blob from its name alone until it
		// is used.
		for _, reopen := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, reopened %v", tc.name, reopen), func(t *testing.T) {
				dir := t.TempDir()
				clock := newClock()
				disk, err := NewDisk(filepath.Join(dir, "cache"), 0, WithFileMode(0o444), WithClock(clock.now))
				if err != nil {
					t.Fatal(err)
				}
				if err := PutBytes(context.Background(), disk, d, b); err != nil {
					t.Fatal(err)
				}
				if reopen {
					clock.advance()
					if disk, err = NewDisk(filepath.Join(dir, "cache"), 0, WithFileMode(0o444), WithClock(clock.now)); err != nil {
						t.Fatal(err)
					}
				}
				first := filepath.Join(dir, "first")
				if err := disk.Link(d, first); err != nil {
					t.Fatal(err)
				}
				if err := tc.change(first); err != nil {
					t.Fatal(err)
				}
				if tc.advance {
					clock.advance()
				} else if ok, err := disk.Unchanged(d); err != nil || ok != tc.kept {
					t.Fatalf("Unchanged = %v, %v; want %v", ok, err, tc.kept)
				}
				second := filepath.Join(dir, "second")
				err = disk.Link(d, second)
				if !tc.kept {
					if status.Code(err) != codes.NotFound {
						t.Fatalf("Link of a changed blob: %v, want NotFound", err)
					}
					if got := present(t, disk, []digest.Digest{d}); got[0] {
						t.Fatal("the changed blob is still stored")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(second)
				info, serr := os.Stat(second)
				if err != nil || serr != nil || string(got) != string(b) || info.Mode().Perm() != 0o444 {
					t.Fatalf("linked again: %q (%v), mode %v (%v); want the stored content, mode 0444", got, err, info.Mode(), serr)
				}
			})
		}
	}
}

// writeTo writes s to the file at p opened with flag, making it writable
// first as a program that means to would.
func writeTo(p string, flag int, s string) error {
	if err := os.Chmod(p, 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|flag, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// A checked disk store hashes a blob again only when it has not found it
// matching its key within checkedFor, or its file changed since. A flip
// the file's change time does not show (one on the disk itself) stands
// for the time that leaves the bytes unchecked.
func TestDiskTrustsACheckedBlobForAWhile(t *testing.T) {
	tests := []struct {
		name string
		// checkedPut stores through ContentAddressed, which checks the
		// bytes; otherwise the first read checks them.
		checkedPut bool
		// rot flips a byte as the disk would, unseen by the change time;
		// otherwise a program writes it.
		rot       bool
		later     time.Duration
		wantWhole bool
	}{
		{"checked at Put, a flip on the disk, soon after", true, true, time.Minute, true},
		{"checked at Put, a flip on the disk, later", true, true, checkedFor, false},
		{"checked at Put, a write to its file", true, false, time.Minute, false},
		{"checked by a read, a flip on the disk, soon after", false, true, time.Minute, true},
		{"checked by a read, a write to its file", false, false, time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Unix(1_800_000_000, 0)
			disk, err := NewDisk(t.TempDir(), 0, WithCheckedReads(), WithClock(func() time.Time { return now }))
			if err != nil {
				t.Fatal(err)
			}
			d, b := blob("some content")
			var put Store = disk
			if tt.checkedPut {
				put = ContentAddressed(disk)
			}
			if err := PutBytes(ctx, put, d, b); err != nil {
				t.Fatal(err)
			}
			if !tt.checkedPut {
				if got, err := GetBytes(ctx, disk, d); err != nil || string(got) != string(b) {
					t.Fatalf("first read: %q, %v", got, err)
				}
			}
			p := disk.path(d)
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := flipByte(p, 3); err != nil {
				t.Fatal(err)
			}
			if tt.rot {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				disk.mu.Lock()
				disk.index[d].Value.(*diskEntry).ctime = changeTime(info)
				disk.mu.Unlock()
			}
			now = now.Add(tt.later)
			got, err := GetBytes(ctx, disk, d)
			if tt.wantWhole {
				if err != nil || len(got) != len(b) {
					t.Fatalf("read within %v of a check: %d bytes, %v; want the file's bytes unchecked", tt.later, len(got), err)
				}
				return
			}
			if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "corrupt") {
				t.Fatalf("read: %q, %v; want NOT_FOUND saying it was corrupt", got, err)
			}
		})
	}
}
