package rules

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
)

// TestRuleAPI runs testdata/*.rbs. Each file holds cases separated by lines
// "---"; a case is a rule file (defs.rbs) and, after a line "# BUILD", the
// root BUILD file. Every target is analysed. A case with a line
// `### "regex"` must fail with an error matching regex; others must succeed
// (their implementations assert with fail()). A line "# platform: P"
// analyses the case for the target platform P; "# define: K=V",
// "# set: //pkg:flag=V", "# compilation_mode: M" and
// "# extra_toolchains: P" set the rest of the configuration. After the
// BUILD file, a line "# FILE: PATH" starts another file of the workspace
// (MODULE.bazel, a package's BUILD).
func TestRuleAPI(t *testing.T) {
	files, err := filepath.Glob("testdata/*.rbs")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	expect := regexp.MustCompile(`(?m)^### "(.*)"\s*$`)
	platformLine := regexp.MustCompile(`(?m)^# platform: (\S+)\s*$`)
	defineLine := regexp.MustCompile(`(?m)^# define: (\S+)\s*$`)
	settingLine := regexp.MustCompile(`(?m)^# set: (//\S+?)=(\S*)\s*$`)
	modeLine := regexp.MustCompile(`(?m)^# compilation_mode: (\S+)\s*$`)
	extraLine := regexp.MustCompile(`(?m)^# extra_toolchains: (\S+)\s*$`)
	platformsLine := regexp.MustCompile(`(?m)^# platforms: (\S+)\s*$`)
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, chunk := range strings.Split(string(b), "\n---\n") {
			name := filepath.Base(file) + "#" + strings.TrimSpace(firstLine(chunk))
			t.Run(name, func(t *testing.T) {
				defs, build, ok := strings.Cut(chunk, "\n# BUILD\n")
				if !ok {
					t.Fatalf("case %d of %s has no \"# BUILD\" line", i, file)
				}
				dir := t.TempDir()
				write(t, dir, "MODULE.bazel", "")
				write(t, dir, "defs.rbs", defs)
				files := strings.Split("\n"+build, "\n# FILE: ")
				files[0] = strings.TrimPrefix(files[0], "\n")
				write(t, dir, "BUILD", files[0])
				write(t, dir, "data/BUILD", `exports_files(["a.txt", "b.txt"])`)
				write(t, dir, "data/a.txt", "a\n")
				write(t, dir, "data/b.txt", "b\n")
				write(t, dir, "src.txt", "source\n")
				write(t, dir, "lib/hello.h", "int hello();\n")
				write(t, dir, "lib/hello.cc", "#include \"lib/hello.h\"\nint hello() { return HELLO; }\n")
				write(t, dir, "main.cc", "#include \"lib/hello.h\"\nint main() { return hello() - 1; }\n")
				write(t, dir, "test.cc", "#include \"lib/hello.h\"\nint main() { return hello() == 1 ? 0 : 1; }\n")
				for _, f := range files[1:] {
					name, content, _ := strings.Cut(f, "\n")
					write(t, dir, name, content)
				}
				cfg := Config{Defines: map[string]string{}, Settings: map[string]string{}, RepoDir: t.TempDir()}
				if m := platformsLine.FindStringSubmatch(chunk); m != nil {
					cfg.Platforms = m[1]
				}
				if m := platformLine.FindStringSubmatch(chunk); m != nil {
					if cfg.Platform, err = platform.Parse(m[1]); err != nil {
						t.Fatal(err)
					}
				}
				for _, m := range defineLine.FindAllStringSubmatch(chunk, -1) {
					k, v, err := ParseDefine(m[1])
					if err != nil {
						t.Fatal(err)
					}
					cfg.Defines[k] = v
				}
				for _, m := range settingLine.FindAllStringSubmatch(chunk, -1) {
					cfg.Settings[m[1]] = m[2]
				}
				if m := modeLine.FindStringSubmatch(chunk); m != nil {
					cfg.CompilationMode = m[1]
				}
				for _, m := range extraLine.FindAllStringSubmatch(chunk, -1) {
					cfg.ExtraToolchains = append(cfg.ExtraToolchains, m[1])
				}
				err := analyzeAll(dir, cfg)
				want := expect.FindStringSubmatch(chunk)
				if want == nil {
					if err != nil {
						t.Fatalf("unexpected error: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("succeeded, want an error matching %q", want[1])
				}
				if !regexp.MustCompile(want[1]).MatchString(err.Error()) {
					t.Fatalf("error %q does not match %q", err, want[1])
				}
			})
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimPrefix(line, "# ")
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func analyzeAll(dir string, cfg Config) error {
	ws, err := Open(dir, cfg)
	if err != nil {
		return err
	}
	if err := ws.CheckSettings(); err != nil {
		return err
	}
	labels, err := ws.Expand([]string{"//..."}, "")
	if err != nil {
		return err
	}
	_, err = ws.Analyze(labels)
	return err
}

func TestLoadResolution(t *testing.T) {
	tests := []struct{ in, pkg, want string }{
		{"//tools/rules.rbs", "", "//tools/rules.rbs"},
		{"//tools:rules.rbs", "x", "//tools/rules.rbs"},
		{":defs.bzl", "a/b", "//a/b/defs.bzl"},
		{"@rbs//python/rules.rbs", "", "@rbs//python/rules.rbs"},
		{"@rbs//python:rules.rbs", "", "@rbs//python/rules.rbs"},
	}
	for _, tt := range tests {
		got, err := resolveForTest(tt.in, tt.pkg)
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tt.in, tt.pkg, got, err, tt.want)
		}
	}
	if _, err := resolveForTest("//tools:rules.txt", ""); err == nil {
		t.Error("loading a .txt file succeeded")
	}
	if _, err := label.Parse("//a/../b:c"); err == nil {
		t.Error("a label with .. parsed")
	}
}

func TestBinDir(t *testing.T) {
	for _, tc := range []struct {
		p, mode, want string
	}{
		{"linux-x86_64", "", "rbs-out/k8-fastbuild/bin"},
		{"linux-x86_64", "opt", "rbs-out/k8-opt/bin"},
		{"linux-arm64", "dbg", "rbs-out/aarch64-dbg/bin"},
		{"darwin-arm64", "fastbuild", "rbs-out/darwin_arm64-fastbuild/bin"},
	} {
		p, err := platform.Parse(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		if got := BinDir(p, tc.mode); got != tc.want {
			t.Errorf("BinDir(%v, %q) = %q; want %q", tc.p, tc.mode, got, tc.want)
		}
	}
	if got, want := BinDir(platform.Platform{}, ""), BinDir(platform.Host(), "fastbuild"); got != want {
		t.Errorf("BinDir of the zero platform = %q; want this machine's, %q", got, want)
	}
}
