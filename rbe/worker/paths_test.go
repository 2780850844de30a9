package worker

import "testing"

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a.txt": true, "..a": true, "": false, ".": false, "..": false, "a/b": false, "a\x00": false} {
		if err := checkName(name); (err == nil) != ok {
			t.Errorf("checkName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestCheckRelPath(t *testing.T) {
	for p, ok := range map[string]bool{"": true, "out": true, "a/b/c": true, "a/../b": true, "./x": true,
		"/etc/passwd": false, "..": false, "../x": false, "a/../../x": false, "a\x00": false} {
		if err := checkRelPath(p); (err == nil) != ok {
			t.Errorf("checkRelPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

func TestCheckSymlink(t *testing.T) {
	tests := []struct {
		dir, target string
		ok          bool
	}{
		{"", "file", true},
		{"a/b", "../c", true},
		{"a/b", "../../c", true},
		{"a", "../../etc/passwd", false},
		{"", "..", false},
		{"", "/etc/passwd", false},
		{"a/b", "../../../x", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if err := checkSymlink(tt.dir, tt.target); (err == nil) != tt.ok {
			t.Errorf("checkSymlink(%q, %q) = %v, want ok=%v", tt.dir, tt.target, err, tt.ok)
		}
	}
}
