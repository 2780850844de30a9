package digest

import (
	"strings"
	"testing"
)

const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		hash    string
		size    int64
		wantErr string
	}{
		{"empty blob", emptyHash, 0, ""},
		{"short hash", "abc", 3, "want 64"},
		{"long hash", emptyHash + "00", 3, "want 64"},
		{"uppercase", strings.ToUpper(emptyHash), 0, "not lowercase hex"},
		{"non hex", strings.Repeat("g", 64), 0, "not lowercase hex"},
		{"negative size", emptyHash, -1, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.hash, tt.size)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if d.Hash() != tt.hash || d.Size() != tt.size {
					t.Fatalf("New = %v", d)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New(%q, %d) error = %v, want %q", tt.hash, tt.size, err, tt.wantErr)
			}
		})
	}
}

func TestFromBytesAndParse(t *testing.T) {
	if Empty.Hash() != emptyHash || Empty.Size() != 0 {
		t.Fatalf("Empty = %v", Empty)
	}
	d := FromBytes([]byte("hello"))
	back, err := Parse(d.String())
	if err != nil || back != d {
		t.Fatalf("Parse(%q) = %v, %v", d.String(), back, err)
	}
	r, err := FromReader(strings.NewReader("hello"))
	if err != nil || r != d {
		t.Fatalf("FromReader = %v, %v; want %v", r, err, d)
	}
	p, err := FromProto(d.Proto())
	if err != nil || p != d {
		t.Fatalf("FromProto = %v, %v", p, err)
	}
	for _, bad := range []string{"", emptyHash, emptyHash + "/x", "abc/1", emptyHash + "/-4"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
	if _, err := FromProto(nil); err == nil {
		t.Error("FromProto(nil) succeeded")
	}
}

func TestVerifier(t *testing.T) {
	d := FromBytes([]byte("hello"))
	tests := []struct {
		name  string
		write string
		ok    bool
	}{
		{"match", "hello", true},
		{"short", "hell", false},
		{"wrong bytes", "jello", false},
		{"too long", "hello!", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(d)
			_, werr := v.Write([]byte(tt.write))
			err := v.Check()
			if werr != nil {
				err = werr
			}
			if (err == nil) != tt.ok {
				t.Fatalf("verify %q: err = %v, want ok=%v", tt.write, err, tt.ok)
			}
		})
	}
}
