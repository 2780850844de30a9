// Package executor runs build actions under one model for local and remote
// execution: an Action (command, environment, input files, declared
// outputs) becomes a REAPI Command, Action and input root with env and
// platform sorted so it hashes the same everywhere. Local runs it in a
// scratch directory holding only the declared inputs, with a local CAS and
// action cache; Remote sends it to a REAPI server (an rbs cluster or any
// other) and downloads its outputs. Cached puts an action cache in front
// of either.
package executor

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Action is one build action.
type Action struct {
	// Description names the action in errors and progress, e.g.
	// "Genrule //pkg:name".
	Description string
	Args        []string
	// Env is the whole environment of the command.
	Env map[string]string
	// Inputs are the files the command may read, at paths relative to the
	// exec root.
	Inputs []merkle.File
	// Outputs are the declared output files, relative to the exec root
	// (e.g. "rbs-out/k8-fastbuild/bin/pkg/out.txt").
	Outputs []string
	// OutputDirs are the declared output directories.
	OutputDirs []string
	// Timeout stops the command after this long; 0 means none.
	Timeout  time.Duration
	Platform map[string]string
	// NoCache neither uses nor fills the action cache (e.g. test actions
	// tagged "external").
	NoCache bool
}

// Result is how an action ended.
type Result struct {
	// ExitCode is the command's exit status: 128+n when a signal n killed
	// it, -1 when it ran past its timeout.
	ExitCode       int
	Stdout, Stderr []byte
	// Cached says the result was served from the action cache: nothing ran.
	Cached bool
	// Digest is the REAPI Action digest.
	Digest digest.Digest
	// ar is the result as an action cache records it, stdout and stderr
	// by digest; in is the Cache whose CAS holds the blobs it names;
	// recordable says a cache may record it: not a remote execution's,
	// which its server recorded, nor one whose blobs were too large to
	// keep.
	ar         *repb.ActionResult
	in         Cache
	recordable bool
}

// Executor runs actions.
type Executor interface {
	// Run executes a (or serves it from the action cache) and writes its
	// outputs under outRoot at their declared relative paths (creating
	// parent directories, replacing existing files; executables keep their
	// x bit). A non-zero exit is a Result with that ExitCode, not an error;
	// then outputs are not written and nothing is cached. Errors are for
	// failures to run at all.
	Run(ctx context.Context, a *Action, outRoot string) (*Result, error)
}

// Prepared holds the REAPI messages of an action.
type Prepared struct {
	Command                     *repb.Command
	Action                      *repb.Action
	CommandBlob, ActionBlob     []byte
	CommandDigest, ActionDigest digest.Digest
	Tree                        *merkle.Tree
}

// marshal serializes m deterministically.
func marshal(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// Prepare computes the REAPI messages of a: the Command (arguments, sorted
// environment, outputs in both the REAPI 2.0 fields output_files and
// output_directories and the 2.1 field output_paths, platform properties
// sorted by name then value), the Action (command digest, input root
// digest, timeout, do_not_cache), their serialized bytes and digests, and
// the input tree. Equal actions give equal digests.
func Prepare(a *Action) (*Prepared, error) {
	name := describe(a)
	if len(a.Args) == 0 {
		return nil, fmt.Errorf("%s has no command", name)
	}
	if a.Timeout < 0 {
		return nil, fmt.Errorf("%s has a negative timeout %s", name, a.Timeout)
	}
	tree, err := merkle.Build(a.Inputs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkOutputs(a); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := &repb.Command{Arguments: append([]string(nil), a.Args...)}
	for _, k := range sortedKeys(a.Env) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("%s: invalid environment variable name %q", name, k)
		}
		cmd.EnvironmentVariables = append(cmd.EnvironmentVariables, &repb.Command_EnvironmentVariable{Name: k, Value: a.Env[k]})
	}
	cmd.OutputFiles = sortedCopy(a.Outputs)
	cmd.OutputDirectories = sortedCopy(a.OutputDirs)
	cmd.OutputPaths = sortedCopy(append(append([]string(nil), a.Outputs...), a.OutputDirs...))
	var platform *repb.Platform
	if len(a.Platform) > 0 {
		platform = &repb.Platform{}
		for _, k := range sortedKeys(a.Platform) {
			platform.Properties = append(platform.Properties, &repb.Platform_Property{Name: k, Value: a.Platform[k]})
		}
		sort.SliceStable(platform.Properties, func(i, j int) bool {
			pi, pj := platform.Properties[i], platform.Properties[j]
			if pi.Name != pj.Name {
				return pi.Name < pj.Name
			}
			return pi.Value < pj.Value
		})
		// REAPI 2.2 reads the platform from the Action, earlier versions
		// from the Command.
		cmd.Platform = platform
	}
	cb, err := marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the command: %w", name, err)
	}
	cd := digest.FromBytes(cb)
	act := &repb.Action{CommandDigest: cd.Proto(), InputRootDigest: tree.Root.Proto(), DoNotCache: a.NoCache, Platform: platform}
	if a.Timeout > 0 {
		act.Timeout = durationpb.New(a.Timeout)
	}
	ab, err := marshal(act)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the action: %w", name, err)
	}
	return &Prepared{
		Command: cmd, Action: act,
		CommandBlob: cb, ActionBlob: ab,
		CommandDigest: cd, ActionDigest: digest.FromBytes(ab),
		Tree: tree,
	}, nil
}

// checkOutputs validates the declared outputs: clean relative paths, none
// twice, none inside another, none an input or holding an input.
func checkOutputs(a *Action) error {
	inputs := map[string]bool{}
	inputDirs := map[string]bool{}
	for _, f := range a.Inputs {
		inputs[f.Path] = true
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			inputDirs[d] = true
		}
	}
	outs := map[string]bool{}
	for _, list := range [][]string{a.Outputs, a.OutputDirs} {
		for _, o := range list {
			if err := merkle.CheckPath(o); err != nil {
				return fmt.Errorf("output: %w", err)
			}
			if outs[o] {
				return fmt.Errorf("output %q is declared twice", o)
			}
			outs[o] = true
			if inputs[o] {
				return fmt.Errorf("output %q is also an input", o)
			}
			if inputDirs[o] {
				return fmt.Errorf("output %q holds inputs", o)
			}
			for d := path.Dir(o); d != "."; d = path.Dir(d) {
				if inputs[d] {
					return fmt.Errorf("output %q is inside input file %q", o, d)
				}
			}
		}
	}
	for o := range outs {
		for d := path.Dir(o); d != "."; d = path.Dir(d) {
			if outs[d] {
				return fmt.Errorf("output %q is inside output %q", o, d)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// describe names an action in messages.
func describe(a *Action) string {
	if a.Description != "" {
		return a.Description
	}
	if len(a.Args) == 0 {
		return "action"
	}
	return fmt.Sprintf("action %q", strings.Join(a.Args, " "))
}
