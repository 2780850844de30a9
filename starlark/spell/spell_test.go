package spell

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"cc_library", "cc_binary", "cc_test", "srcs", "deps", "hdrs", "genrule", "count"}
	for _, tc := range []struct{ in, want string }{
		{"cc_libary", "cc_library"},
		{"cc_librray", "cc_library"},
		{"srcss", "srcs"},
		{"Srcs", "srcs"},
		{"dep", "deps"},
		{"genrul", "genrule"},
		{"cuont", "count"}, // a swap is one edit
		{"srcs", ""},       // itself is no misspelling
		{"xyz", ""},
		{"cc_bin", ""}, // three letters of six apart
		{"", ""},
	} {
		if got := Nearest(tc.in, names); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := DidYouMean("srcss", names); got != " (did you mean srcs?)" {
		t.Errorf("DidYouMean(srcss) = %q", got)
	}
}
