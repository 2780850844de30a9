package stamp

import (
	"fmt"
	"slices"

	"github.com/rbs-build/rbs/rbe/packed"
)

// A stamp is read at the start of every build, and a no-op build is little
// more than that read and a stat of each file: it is kept in a packed form
// (sorted names sharing prefixes), which gob carries as bytes, rather than
// as a gob map.

// encodingVersion starts an encoded stamp.
const encodingVersion = 2

// MarshalBinary implements encoding.BinaryMarshaler.
func (s *Stamp) MarshalBinary() ([]byte, error) {
	names := make([]string, 0, len(s.Files))
	for p := range s.Files {
		names = append(names, p)
	}
	slices.Sort(names)
	var w packed.Writer
	w.Uvarint(encodingVersion)
	sum := s.Summary
	w.Uvarint(uint64(sum.Targets))
	w.Uvarint(uint64(sum.Actions))
	w.Uvarint(uint64(sum.Internal))
	w.String(sum.Outputs)
	w.String(sum.Debug)
	w.Uvarint(uint64(len(names)))
	var ns packed.Names
	for _, p := range names {
		st := s.Files[p]
		w.Name(&ns, p)
		w.Uvarint(uint64(st.Mode))
		w.Varint(st.Size)
		w.Varint(st.Mtime)
		w.Varint(st.Ctime)
		w.Uvarint(st.Ino)
		w.Bool(st.Missing)
		w.String(st.Content)
	}
	return w.B, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (s *Stamp) UnmarshalBinary(b []byte) error {
	r := packed.Reader{B: b}
	if v := r.Uvarint(); v != encodingVersion {
		return fmt.Errorf("stamp: encoding version %d, want %d", v, encodingVersion)
	}
	s.Summary = Summary{Targets: int(r.Uvarint()), Actions: int(r.Uvarint()), Internal: int(r.Uvarint()), Outputs: r.String(), Debug: r.String()}
	n := r.Count(9) // an entry takes at least 9 bytes
	s.Files = make(map[string]State, n)
	for range n {
		p := r.Name()
		s.Files[p] = State{Mode: uint32(r.Uvarint()), Size: r.Varint(), Mtime: r.Varint(), Ctime: r.Varint(), Ino: r.Uvarint(), Missing: r.Bool(), Content: r.String()}
	}
	if err := r.End(); err != nil {
		return fmt.Errorf("stamp: %w", err)
	}
	return nil
}
