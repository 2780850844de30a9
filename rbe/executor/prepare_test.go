package executor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
)

func memFile(p, content string) merkle.File {
	return merkle.File{Path: p, Digest: digest.FromBytes([]byte(content)), Data: []byte(content)}
}

// action builds the same action with freshly made maps, filled in an
// order that depends on seed.
func sampleAction(seed int) *Action {
	env, platform := map[string]string{}, map[string]string{}
	for i := 0; i < 20; i++ {
		k := (i*7 + seed) % 20
		env[fmt.Sprintf("VAR%02d", k)] = fmt.Sprint("value", k)
		platform[fmt.Sprintf("prop%02d", k)] = fmt.Sprint("v", k)
	}
	return &Action{
		Description: "Genrule //pkg:gen",
		Args:        []string{"sh", "-c", "true"},
		Env:         env,
		Inputs:      []merkle.File{memFile("pkg/b.txt", "b"), memFile("pkg/a.txt", "a")},
		Outputs:     []string{"out/z.txt", "out/a.txt"},
		OutputDirs:  []string{"out/dir"},
		Timeout:     time.Minute,
		Platform:    platform,
		NoCache:     true,
	}
}

func TestPrepareIsDeterministic(t *testing.T) {
	first, err := Prepare(sampleAction(0))
	if err != nil {
		t.Fatal(err)
	}
	for seed := 1; seed < 30; seed++ {
		p, err := Prepare(sampleAction(seed))
		if err != nil {
			t.Fatal(err)
		}
		if p.ActionDigest != first.ActionDigest || p.CommandDigest != first.CommandDigest {
			t.Fatalf("seed %d: digests %s %s, want %s %s", seed, p.ActionDigest, p.CommandDigest, first.ActionDigest, first.CommandDigest)
		}
	}
	cmd, act := first.Command, first.Action
	for i := 1; i < len(cmd.EnvironmentVariables); i++ {
		if cmd.EnvironmentVariables[i-1].Name >= cmd.EnvironmentVariables[i].Name {
			t.Fatalf("environment not sorted: %v", cmd.EnvironmentVariables)
		}
	}
	props := act.Platform.GetProperties()
	if len(props) != 20 || cmd.Platform == nil {
		t.Fatalf("platform %v / %v", act.Platform, cmd.Platform)
	}
	for i := 1; i < len(props); i++ {
		if props[i-1].Name >= props[i].Name {
			t.Fatalf("platform not sorted: %v", props)
		}
	}
	if got := strings.Join(cmd.OutputFiles, ","); got != "out/a.txt,out/z.txt" {
		t.Fatalf("output_files %s", got)
	}
	if got := strings.Join(cmd.OutputDirectories, ","); got != "out/dir" {
		t.Fatalf("output_directories %s", got)
	}
	if got := strings.Join(cmd.OutputPaths, ","); got != "out/a.txt,out/dir,out/z.txt" {
		t.Fatalf("output_paths %s", got)
	}
	if !act.DoNotCache || act.Timeout.AsDuration() != time.Minute {
		t.Fatalf("action %v", act)
	}
	if act.InputRootDigest.Hash != first.Tree.Root.Hash() || digest.FromBytes(first.CommandBlob) != first.CommandDigest ||
		digest.FromBytes(first.ActionBlob) != first.ActionDigest {
		t.Fatal("digests do not match the blobs")
	}

	// Every part of the action counts.
	for name, change := range map[string]func(*Action){
		"env":      func(a *Action) { a.Env["VAR00"] = "other" },
		"platform": func(a *Action) { a.Platform["prop00"] = "other" },
		"args":     func(a *Action) { a.Args = []string{"sh", "-c", "false"} },
		"input":    func(a *Action) { a.Inputs[0] = memFile("pkg/b.txt", "B") },
		"output":   func(a *Action) { a.Outputs = a.Outputs[:1] },
		"timeout":  func(a *Action) { a.Timeout = time.Hour },
		"cache":    func(a *Action) { a.NoCache = false },
	} {
		a := sampleAction(0)
		change(a)
		p, err := Prepare(a)
		if err != nil {
			t.Fatal(err)
		}
		if p.ActionDigest == first.ActionDigest {
			t.Errorf("changing %s keeps the action digest", name)
		}
	}
}

func TestPrepareErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Action)
		want   string
	}{
		{"no command", func(a *Action) { a.Args = nil }, "no command"},
		{"absolute output", func(a *Action) { a.Outputs = []string{"/tmp/x"} }, `"/tmp/x"`},
		{"escaping output", func(a *Action) { a.Outputs = []string{"../x"} }, `"../x"`},
		{"output twice", func(a *Action) { a.Outputs = []string{"x", "x"} }, `"x" is declared twice`},
		{"output in output", func(a *Action) { a.OutputDirs = []string{"d"}; a.Outputs = []string{"d/x"} }, `"d/x" is inside output "d"`},
		{"output is input", func(a *Action) { a.Outputs = []string{"pkg/a.txt"} }, `"pkg/a.txt" is also an input`},
		{"output holds input", func(a *Action) { a.OutputDirs = []string{"pkg"} }, `"pkg" holds inputs`},
		{"bad input", func(a *Action) { a.Inputs = []merkle.File{memFile("../in", "x")} }, `"../in"`},
		{"bad env", func(a *Action) { a.Env = map[string]string{"A=B": "c"} }, `"A=B"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := sampleAction(0)
			tc.change(a)
			_, err := Prepare(a)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Genrule //pkg:gen") {
				t.Fatalf("Prepare: %v, want an error naming the action and containing %s", err, tc.want)
			}
		})
	}
}
