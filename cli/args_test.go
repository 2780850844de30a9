package cli

import (
	"slices"
	"testing"
)

func TestBuildSettings(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"build", "--//cfg:color=red", "//app"}, []string{"build", "--set", "//cfg:color=red", "//app"}},
		{[]string{"build", "--//cfg:fast", "--no//cfg:lto"}, []string{"build", "--set", "//cfg:fast=true", "--set", "//cfg:lto=false"}},
		{[]string{"run", "//app", "--", "--//not:a_setting"}, []string{"run", "//app", "--", "--//not:a_setting"}},
		{[]string{"build", "--define", "k=v"}, []string{"build", "--define", "k=v"}},
	} {
		if got := buildSettings(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("buildSettings(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
