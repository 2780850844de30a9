package blobstore

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// switchable is a backend that can be switched off, when it answers every
// call Unavailable as an unreachable server does.
type switchable struct {
	Store
	off atomic.Bool
}

func (s *switchable) down() error {
	if s.off.Load() {
		return status.Error(codes.Unavailable, "switched off")
	}
	return nil
}

func (s *switchable) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	if err := s.down(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, d, offset)
}

func (s *switchable) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	if err := s.down(); err != nil {
		return err
	}
	return s.Store.Put(ctx, d, r)
}

func (s *switchable) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	if err := s.down(); err != nil {
		return nil, err
	}
	return s.Store.FindMissing(ctx, ds)
}

// failing is a backend whose writes fail with err.
type failing struct {
	Store
	err error
}

func (f failing) Put(context.Context, digest.Digest, io.Reader) error { return f.err }

// brokenReader fails after its first bytes.
type brokenReader struct{ sent bool }

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.sent {
		return 0, errors.New("connection reset")
	}
	b.sent = true
	return copy(p, "partial"), nil
}

func has(m *Memory, d digest.Digest) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.blobs[d]
	return ok
}

func newMirror() (*Mirror, *Memory, *Memory, *switchable, *switchable) {
	a, b := NewMemory(), NewMemory()
	sa, sb := &switchable{Store: a}, &switchable{Store: b}
	return NewMirror(sa, sb), a, b, sa, sb
}

func TestMirrorWritesBothSides(t *testing.T) {
	ctx := context.Background()
	m, a, b, _, _ := newMirror()
	d, data := blob("on both sides")
	if err := PutBytes(ctx, m, d, data); err != nil {
		t.Fatal(err)
	}
	if !has(a, d) || !has(b, d) {
		t.Fatalf("after Put: on a %v, on b %v; want both", has(a, d), has(b, d))
	}
	for range 2 { // once from each side
		rc, err := m.Get(ctx, d, 3)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != string(data[3:]) {
			t.Fatalf("Get from offset 3 = %q", got)
		}
	}
	// A big blob goes through the one pass over the reader to both.
	big := strings.Repeat("0123456789", 300000)
	bd := digest.FromBytes([]byte(big))
	if err := m.Put(ctx, bd, strings.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	for _, side := range []*Memory{a, b} {
		if got, _ := GetBytes(ctx, side, bd); string(got) != big {
			t.Fatalf("a side holds %d bytes of the big blob, want %d", len(got), len(big))
		}
	}
}

// One side switched off, the mirror goes on from the other; switched back
// on, a read or an existence check of a blob written meanwhile copies it
// back to that side.
func TestMirrorDegradedAndRepaired(t *testing.T) {
	ctx := context.Background()
	for _, repairBy := range []string{"Get", "FindMissing"} {
		t.Run(repairBy, func(t *testing.T) {
			m, a, b, _, sb := newMirror()
			before, beforeData := blob("written before")
			if err := PutBytes(ctx, m, before, beforeData); err != nil {
				t.Fatal(err)
			}
			sb.off.Store(true)
			d, data := blob("written while b was down")
			absent, _ := blob("absent")
			if err := PutBytes(ctx, m, d, data); err != nil {
				t.Fatalf("Put with one side down: %v", err)
			}
			for _, k := range []digest.Digest{before, d, before, d} { // both orders of the sides
				if _, err := GetBytes(ctx, m, k); err != nil {
					t.Fatalf("Get with one side down: %v", err)
				}
			}
			if _, err := m.Get(ctx, absent, 0); !IsNotFound(err) {
				t.Fatalf("Get of an absent blob with one side down: %v, want NotFound", err)
			}
			missing, err := m.FindMissing(ctx, []digest.Digest{d, absent})
			if err != nil || len(missing) != 1 || missing[0] != absent {
				t.Fatalf("FindMissing with one side down = %v, %v; want [%s]", missing, err, absent)
			}
			if has(b, d) {
				t.Fatal("the side that was down has the blob")
			}

			sb.off.Store(false)
			switch repairBy {
			case "Get":
				for range 2 { // one of the two reads asks b first
					if got, err := GetBytes(ctx, m, d); err != nil || string(got) != string(data) {
						t.Fatalf("Get = %q, %v", got, err)
					}
				}
			case "FindMissing":
				missing, err := m.FindMissing(ctx, []digest.Digest{d, absent, before})
				if err != nil || len(missing) != 1 || missing[0] != absent {
					t.Fatalf("FindMissing = %v, %v; want [%s]", missing, err, absent)
				}
			}
			if got, err := GetBytes(ctx, b, d); err != nil || string(got) != string(data) {
				t.Fatalf("after the %s, the side that was down holds %q, %v; want the blob", repairBy, got, err)
			}
			if !has(a, d) {
				t.Fatal("the repair lost the blob on the other side")
			}
		})
	}
}

func TestMirrorErrors(t *testing.T) {
	ctx := context.Background()
	d, data := blob("blob")
	full := status.Error(codes.ResourceExhausted, "disk full")
	for _, tc := range []struct {
		name      string
		a, b      func(*switchable) Store // wrap a side
		code      codes.Code              // of Put
		onA, onB  bool                    // where the blob is after Put
		getCode   codes.Code              // of a Get after Put
		reader    io.Reader
		findError bool
	}{
		{name: "both up", code: codes.OK, onA: true, onB: true},
		{name: "a down", a: off, code: codes.OK, onB: true},
		{name: "b down", b: off, code: codes.OK, onA: true},
		{name: "both down", a: off, b: off, code: codes.Unavailable, getCode: codes.Unavailable, findError: true},
		{name: "a full", a: fails(full), code: codes.ResourceExhausted, onB: true},
		{name: "b full, a down", a: off, b: fails(full), code: codes.ResourceExhausted, getCode: codes.NotFound},
		{name: "broken reader", code: codes.Unknown, reader: &brokenReader{}, getCode: codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NewMemory(), NewMemory()
			var sa, sb Store = &switchable{Store: a}, &switchable{Store: b}
			if tc.a != nil {
				sa = tc.a(sa.(*switchable))
			}
			if tc.b != nil {
				sb = tc.b(sb.(*switchable))
			}
			m := NewMirror(sa, sb)
			r := tc.reader
			if r == nil {
				r = strings.NewReader(string(data))
			}
			if err := m.Put(ctx, d, r); status.Code(err) != tc.code {
				t.Fatalf("Put: %v, want %v", err, tc.code)
			}
			if has(a, d) != tc.onA || has(b, d) != tc.onB {
				t.Fatalf("on a %v, on b %v; want %v, %v", has(a, d), has(b, d), tc.onA, tc.onB)
			}
			for range 2 {
				_, err := m.Get(ctx, d, 0)
				if status.Code(err) != tc.getCode {
					t.Fatalf("Get: %v, want %v", err, tc.getCode)
				}
			}
			if _, err := m.FindMissing(ctx, []digest.Digest{d}); (err != nil) != tc.findError {
				t.Fatalf("FindMissing: %v", err)
			}
		})
	}
}

func off(s *switchable) Store {
	s.off.Store(true)
	return s
}

func fails(err error) func(*switchable) Store {
	return func(s *switchable) Store { return failing{s, err} }
}
