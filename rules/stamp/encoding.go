package stamp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// A stamp is read at the start of every build, and a no-op build is little
// more than that read and a stat of each file: it is kept in a compact
// form of its own, which gob carries as bytes, rather than as a gob map,
// which decodes an order of magnitude slower. The names are sorted, each
// written as the length of what it shares with the one before and the
// rest.

// encodingVersion starts an encoded stamp.
const encodingVersion = 1

// MarshalBinary implements encoding.BinaryMarshaler.
func (s *Stamp) MarshalBinary() ([]byte, error) {
	names := make([]string, 0, len(s.Files))
	for p := range s.Files {
		names = append(names, p)
	}
	slices.Sort(names)
	b := binary.AppendUvarint(nil, encodingVersion)
	sum := s.Summary
	b = binary.AppendUvarint(b, uint64(sum.Targets))
	b = binary.AppendUvarint(b, uint64(sum.Actions))
	b = binary.AppendUvarint(b, uint64(sum.Internal))
	b = appendString(b, sum.Outputs)
	b = binary.AppendUvarint(b, uint64(len(names)))
	last := ""
	for _, p := range names {
		shared := 0
		for shared < len(last) && shared < len(p) && last[shared] == p[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared))
		b = appendString(b, p[shared:])
		last = p
		st := s.Files[p]
		b = binary.AppendUvarint(b, uint64(st.Mode))
		b = binary.AppendVarint(b, st.Size)
		b = binary.AppendVarint(b, st.Mtime)
		b = binary.AppendVarint(b, st.Ctime)
		b = binary.AppendUvarint(b, st.Ino)
		missing := byte(0)
		if st.Missing {
			missing = 1
		}
		b = append(b, missing)
		b = appendString(b, st.Content)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (s *Stamp) UnmarshalBinary(b []byte) (err error) {
	d := decoder{b: b}
	if v := d.uvarint(); v != encodingVersion {
		return fmt.Errorf("stamp: encoding version %d, want %d", v, encodingVersion)
	}
	s.Summary = Summary{Targets: int(d.uvarint()), Actions: int(d.uvarint()), Internal: int(d.uvarint()), Outputs: d.string()}
	n := d.uvarint()
	if n > uint64(len(b)) { // each entry takes bytes
		return errors.New("stamp: more entries than bytes")
	}
	s.Files = make(map[string]State, n)
	var name []byte
	for range n {
		shared := d.uvarint()
		if shared > uint64(len(name)) {
			return errors.New("stamp: a name shares more than the one before holds")
		}
		name = append(name[:shared], d.string()...)
		st := State{Mode: uint32(d.uvarint()), Size: d.varint(), Mtime: d.varint(), Ctime: d.varint(), Ino: d.uvarint()}
		st.Missing = d.byte() == 1
		st.Content = d.string()
		if d.err != nil {
			return d.err
		}
		s.Files[string(name)] = st
	}
	if d.err == nil && len(d.b) > 0 {
		return errors.New("stamp: bytes left after its entries")
	}
	return d.err
}

// decoder reads what MarshalBinary wrote; its first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("stamp: cut short")

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errShort
	}
	d.b = nil
}
