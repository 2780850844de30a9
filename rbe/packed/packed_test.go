package packed

import (
	"slices"
	"testing"
)

// What a Writer wrote reads back the same, and a cut or altered copy is
// an error, never a panic.
func TestRoundTrip(t *testing.T) {
	names := []string{"/w/a", "/w/a/b", "/w/ab", "/x", ""}
	slices.Sort(names)
	var w Writer
	w.Uvarint(7)
	w.Varint(-3)
	w.Bool(true)
	w.String("héllo")
	var n Names
	for _, name := range names {
		w.Name(&n, name)
	}
	r := Reader{B: w.B}
	if u, v, b, s := r.Uvarint(), r.Varint(), r.Bool(), r.String(); u != 7 || v != -3 || !b || s != "héllo" {
		t.Fatalf("read %d %d %v %q", u, v, b, s)
	}
	for _, want := range names {
		if got := r.Name(); got != want {
			t.Fatalf("name %q, want %q", got, want)
		}
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	for cut := range len(w.B) {
		r := Reader{B: w.B[:cut]}
		r.Uvarint()
		r.Varint()
		r.Bool()
		_ = r.String()
		for range names {
			r.Name()
		}
		if r.End() == nil {
			t.Fatalf("%d bytes of %d read without an error", cut, len(w.B))
		}
	}
	if r := (Reader{B: []byte{5, 0}}); r.Count(1) != 0 || r.Err == nil {
		t.Fatal("a count of 5 entries in 1 byte was taken")
	}
}
