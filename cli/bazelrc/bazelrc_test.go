package bazelrc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// flags is a command's grammar for the tests: bool flags, flags with
// values, and build settings.
func flags(name string) Kind {
	if strings.HasPrefix(name, "//") {
		return Bool
	}
	switch name {
	case "keep_going", "stamp":
		return Bool
	case "jobs", "define", "remote_cache", "test_output":
		return Value
	}
	return Unknown
}

func TestExpand(t *testing.T) {
	for _, c := range []struct {
		name     string
		files    map[string]string // by name under the workspace; "HOME" is ~/.bazelrc
		chain    []string
		args     []string
		want     string // the expanded words, joined by spaces
		warnings []string
		err      string
		// announced is what --announce_rc tells, workspace paths as
		// WS; the host OS is "linux".
		announced []string
	}{
		{
			name:  "--enable_platform_specific_config applies COMMAND:linux with the files' priority; --announce_rc tells Bazel's lines, a config before those it includes",
			files: map[string]string{".bazelrc": "build --enable_platform_specific_config --jobs=1\ncommon --stamp\nbuild:linux --jobs=2\nbuild:linux --define=os=linux\nbuild:macos --jobs=3\nbuild:a --config=b\nbuild:b --define=b=1\n"},
			chain: []string{"common", "build"}, args: []string{"--config=a", "--announce_rc", "--jobs=4", "//x"},
			want: "--stamp --jobs=1 --jobs=2 --define=os=linux --define=b=1 --jobs=4 //x",
			announced: []string{
				"INFO: Reading rc options for 'build' from WS/.bazelrc:",
				"  Inherited 'common' options: --stamp",
				"  'build' options: --enable_platform_specific_config --jobs=1",
				"INFO: Found applicable config definition build:a in file WS/.bazelrc: --config=b",
				"INFO: Found applicable config definition build:b in file WS/.bazelrc: --define=b=1",
				"INFO: Found applicable config definition build:linux in file WS/.bazelrc: --jobs=2 --define=os=linux",
			},
		},
		{
			name:  "--noenable_platform_specific_config on the command line wins; nothing is told without --announce_rc",
			files: map[string]string{".bazelrc": "build --enable_platform_specific_config\nbuild:linux --jobs=2\n"},
			chain: []string{"common", "build"}, args: []string{"--noenable_platform_specific_config", "//x"},
			want: "//x",
		},
		{
			name:  "common, then build, then test; the workspace's file before the home one; the command line last",
			files: map[string]string{".bazelrc": "test --test_output=errors\nbuild --jobs=2\ncommon --stamp\n", "HOME": "build --jobs=3\n"},
			chain: []string{"common", "build", "test"}, args: []string{"--jobs=4", "//..."},
			want: "--stamp --jobs=2 --jobs=3 --test_output=errors --jobs=4 //...",
		},
		{
			name:  "lines of other commands are not this one's",
			files: map[string]string{".bazelrc": "query --jobs=9\nrun --jobs=8\nstartup --host_jvm_args=-Xmx1g\nbuild --jobs=2\n"},
			chain: []string{"common", "build"}, args: []string{"//..."},
			want: "--jobs=2 //...",
		},
		{
			name:  "--config in place, in the file's lines and on the command line, nested, and in both its forms",
			files: map[string]string{".bazelrc": "build --config=base\nbuild:base --jobs=1\nbuild:opt --define=mode=opt --config base\ntest:opt --test_output=all\n"},
			chain: []string{"common", "build", "test"}, args: []string{"--stamp", "--config", "opt", "//x"},
			want: "--jobs=1 --stamp --define=mode=opt --jobs=1 --test_output=all //x",
		},
		{
			name:  "words split as a shell splits them",
			files: map[string]string{".bazelrc": "build --define='a=b c' \"--define=d=\\\"e\\\"\" \\\n  --jobs 5 # a comment --stamp\n# --keep_going\n"},
			chain: []string{"common", "build"}, args: nil,
			want: "--define=a=b c --define=d=\"e\" --jobs 5",
		},
		{
			name:  "a config no file defines is an error naming the lines it looks for",
			files: map[string]string{".bazelrc": "build --jobs=2\n"},
			chain: []string{"common", "build"}, args: []string{"--config=x"},
			err: "--config=x: no rc file has a line for it (common:x, build:x)",
		},
		{
			name:     "a flag rbs does not take is one warning naming its file and line, dropped with its value",
			files:    map[string]string{".bazelrc": "build --jobs=2\nbuild --disk_cache /tmp/c --incompatible_x --stamp\n"},
			chain:    []string{"common", "build"},
			want:     "--jobs=2 --stamp",
			warnings: []string{".bazelrc:2: rbs build does not take --disk_cache; ignored", ".bazelrc:2: rbs build does not take --incompatible_x; ignored"},
		},
		{
			name:  "--noNAME of a bool flag is NAME=false; build settings pass",
			files: map[string]string{".bazelrc": "build --nokeep_going --//pkg:flag=on\n"},
			chain: []string{"common", "build"},
			want:  "--keep_going=false --//pkg:flag=on",
		},
		{
			name:  "nothing after -- is expanded",
			files: map[string]string{".bazelrc": "run:x --jobs=1\n"},
			chain: []string{"common", "build", "run"}, args: []string{"//t", "--", "--config=x"},
			want: "//t -- --config=x",
		},
		{
			name:  "import and try-import, %workspace% and a path from the directory the command runs in",
			files: map[string]string{".bazelrc": "import %workspace%/tools/a.rc\ntry-import %workspace%/absent.rc\ntry-import tools/b.rc\n", "tools/a.rc": "build --jobs=7\n", "tools/b.rc": "build --stamp\n"},
			chain: []string{"common", "build"},
			want:  "--jobs=7 --stamp",
		},
		{
			name:  "an import that is absent is an error naming it",
			files: map[string]string{".bazelrc": "import %workspace%/absent.rc\n"},
			chain: []string{"common", "build"},
			err:   "absent.rc",
		},
		{
			name:  "a file that imports itself",
			files: map[string]string{".bazelrc": "import %workspace%/a.rc\n", "a.rc": "import %workspace%/.bazelrc\n"},
			chain: []string{"common", "build"},
			err:   "imports itself",
		},
		{
			name:  "a config that includes itself",
			files: map[string]string{".bazelrc": "build:a --config=b\nbuild:b --config=a\n"},
			chain: []string{"common", "build"}, args: []string{"--config=a"},
			err: "--config=a includes itself: a -> b -> a",
		},
		{
			name:  "a quote left open names its line",
			files: map[string]string{".bazelrc": "build --jobs=1\nbuild --define='x\n"},
			chain: []string{"common", "build"},
			err:   ".bazelrc:2: the quote ' is not closed",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, home := t.TempDir(), t.TempDir()
			for name, text := range c.files {
				p := filepath.Join(ws, name)
				if name == "HOME" {
					p = filepath.Join(home, ".bazelrc")
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var warnings, announced []string
			rc, err := Read([]File{{Path: filepath.Join(ws, ".bazelrc"), Optional: true}, {Path: filepath.Join(home, ".bazelrc"), Optional: true}}, ws, ws)
			var got []string
			if err == nil {
				rc.HostOS = "linux"
				rc.Announce = func(line string) { announced = append(announced, strings.ReplaceAll(line, ws, "WS")) }
				got, err = rc.Expand(c.chain, c.args, flags, nil, func(w string) { warnings = append(warnings, strings.TrimPrefix(w, ws+"/")) })
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("expanded to %q, want %q", strings.Join(got, " "), c.want)
			}
			if strings.Join(warnings, "\n") != strings.Join(c.warnings, "\n") {
				t.Fatalf("warnings %q, want %q", warnings, c.warnings)
			}
			if strings.Join(announced, "\n") != strings.Join(c.announced, "\n") {
				t.Fatalf("announced:\n%s\nwant:\n%s", strings.Join(announced, "\n"), strings.Join(c.announced, "\n"))
			}
		})
	}
}
