package spec

import (
	"fmt"
	"strings"
	"testing"
)

// checkRejected fails t unless err quotes input and mentions reason.
func checkRejected(t *testing.T, input string, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Errorf("%q: accepted, want error mentioning %q", input, reason)
		return
	}
	if q := fmt.Sprintf("%q", input); !strings.Contains(err.Error(), q) {
		t.Errorf("%q: error %q does not quote the input", input, err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("%q: error %q does not mention %q", input, err, reason)
	}
}
