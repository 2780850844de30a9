// Package packed writes and reads the compact forms in which rbs keeps
// large tables between builds (file stamps, file digests): varints,
// length-prefixed strings, and sorted names each written as the length it
// shares with the one before and the rest. They decode an order of
// magnitude faster than the same tables as gob maps.
package packed

import (
	"encoding/binary"
	"errors"
)

// Writer appends to B.
type Writer struct{ B []byte }

// Uvarint appends v.
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// Varint appends v.
func (w *Writer) Varint(v int64) { w.B = binary.AppendVarint(w.B, v) }

// Bool appends b as a byte.
func (w *Writer) Bool(b bool) {
	if b {
		w.B = append(w.B, 1)
	} else {
		w.B = append(w.B, 0)
	}
}

// String appends s with its length.
func (w *Writer) String(s string) {
	w.Uvarint(uint64(len(s)))
	w.B = append(w.B, s...)
}

// Names is a Writer's state for a sorted run of names.
type Names struct{ last string }

// Name appends name as what it shares with the name before in n and the
// rest; names must come sorted for the shares to be long.
func (w *Writer) Name(n *Names, name string) {
	shared := 0
	for shared < len(n.last) && shared < len(name) && n.last[shared] == name[shared] {
		shared++
	}
	w.Uvarint(uint64(shared))
	w.String(name[shared:])
	n.last = name
}

// ErrShort is a Reader's error when its bytes end before what it reads,
// or hold what no Writer wrote.
var ErrShort = errors.New("packed: cut short or corrupt")

// Reader reads what a Writer wrote from B; its first error sticks, and
// what it reads after is zero.
type Reader struct {
	B   []byte
	Err error
	// name is the last name read (Name).
	name []byte
}

func (r *Reader) fail() {
	if r.Err == nil {
		r.Err = ErrShort
	}
	r.B = nil
}

// Uvarint reads a Uvarint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a Varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bool reads a Bool.
func (r *Reader) Bool() bool {
	if len(r.B) == 0 || r.B[0] > 1 {
		r.fail()
		return false
	}
	b := r.B[0] == 1
	r.B = r.B[1:]
	return b
}

// Bytes reads what String wrote, without copying it.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if n > uint64(len(r.B)) {
		r.fail()
		return nil
	}
	b := r.B[:n:n]
	r.B = r.B[n:]
	return b
}

// String reads a String.
func (r *Reader) String() string { return string(r.Bytes()) }

// Name reads what Name wrote, following the names read before.
func (r *Reader) Name() string {
	shared := r.Uvarint()
	if shared > uint64(len(r.name)) {
		r.fail()
		return ""
	}
	r.name = append(r.name[:shared], r.Bytes()...)
	return string(r.name)
}

// Count reads a count of entries, each at least min bytes long: a count
// the bytes left cannot hold is an error, before anything is made for it.
func (r *Reader) Count(min int) int {
	n := r.Uvarint()
	if n > uint64(len(r.B)/max(min, 1)) {
		r.fail()
		return 0
	}
	return int(n)
}

// End reports the Reader's error, or one when bytes are left unread.
func (r *Reader) End() error {
	if r.Err == nil && len(r.B) > 0 {
		return errors.New("packed: bytes left after the end")
	}
	return r.Err
}
