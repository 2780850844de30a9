package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// TestUnderscoredFlagsTakeHyphens: every flag spelt with Bazel's
// underscores (--remote_cache) is also taken hyphenated (--remote-cache).
func TestUnderscoredFlagsTakeHyphens(t *testing.T) {
	var c CLI
	k, err := kong.New(&c, Options()...)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			if strings.Contains(f.Name, "_") {
				found++
				if want := strings.ReplaceAll(f.Name, "_", "-"); !slices.Contains(f.Aliases, want) {
					t.Errorf("%s --%s: no alias --%s", n.FullPath(), f.Name, want)
				}
			}
		}
		for _, ch := range n.Children {
			walk(ch)
		}
	}
	walk(k.Model.Node)
	if found == 0 {
		t.Fatal("no underscored flag found")
	}
}
