package cli

import (
	"os"
	"strings"
)

// Args rewrites a command line before it is parsed: the #RBS and #SBATCH
// lines of a submitted script become flags (ExpandDirectives, warning on
// stderr of what it ignores), and Bazel's build
// setting flags, --//pkg:flag=value, --//pkg:flag and --no//pkg:flag, become
// --set //pkg:flag=value (true, false), which the build commands take.
func Args(args []string) ([]string, error) {
	args, err := ExpandDirectives(args, os.Stderr)
	if err != nil {
		return nil, err
	}
	return buildSettings(args), nil
}

// buildSettings rewrites the build setting flags before a "--".
func buildSettings(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		switch {
		case strings.HasPrefix(a, "--//") || strings.HasPrefix(a, "--@"):
			setting := strings.TrimPrefix(a, "--")
			if !strings.Contains(setting, "=") {
				setting += "=true"
			}
			out = append(out, "--set", setting)
		case strings.HasPrefix(a, "--no//") || strings.HasPrefix(a, "--no@"):
			out = append(out, "--set", strings.TrimPrefix(a, "--no")+"=false")
		default:
			out = append(out, a)
		}
	}
	return out
}
