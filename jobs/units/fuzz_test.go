package units

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParseSize checks ParseSize's promises: no panic, a rejection that
// quotes the input, and a non-negative size that prints back to the same
// size. `go test` runs the seeds; `go test -fuzz FuzzParseSize ./jobs/units`
// explores further.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512MiB", "50GiB", "1.5G", "10 KB", "0", "-1", "1e3", "GiB", "1.2.3M", "0.1B", "99999999999T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		z, err := ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("%q: error %q does not quote the input", s, err)
			}
			return
		}
		if z < 0 {
			t.Fatalf("%q: negative size %d", s, z)
		}
		back, err := ParseSize(z.String())
		if err != nil || back != z {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, z.String(), back, err)
		}
	})
}
