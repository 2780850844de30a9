package worker

import "testing"

func TestCheckRelPath(t *testing.T) {
	for p, ok := range map[string]bool{"": true, "out": true, "a/b/c": true, "a/../b": true, "./x": true,
		"/etc/passwd": false, "..": false, "../x": false, "a/../../x": false, "a\x00": false} {
		if err := checkRelPath(p); (err == nil) != ok {
			t.Errorf("checkRelPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}
