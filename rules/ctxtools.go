package rules

// The rest of ctx that rules reach for: tools and commands resolved as
// Bazel resolves them (resolve_tools, resolve_command, with their runfiles
// trees as input manifests), make variables (expand_make_variables),
// tokenize, the configuration, coverage, and the target platform's
// constraints (target_platform_has_constraint).

import (
	"fmt"
	"os"
	osuser "os/user"
	"regexp"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// moreAttrNames are the names ctxAttr answers.
var moreAttrNames = []string{"aspect_ids", "check_placeholders", "configuration", "coverage_instrumented", "created_actions", "default_provider",
	"expand", "expand_make_variables", "host_configuration", "host_fragments", "info_file", "new_file", "resolve_command", "resolve_tools",
	"target_platform_has_constraint", "tokenize", "version_file"}

// moreAttr is ctx.NAME for moreAttrNames; nil for another name.
func (c *ruleContext) moreAttr(name string) (starlark.Value, error) {
	switch name {
	case "aspect_ids":
		return starlark.NewList(nil), nil
	case "check_placeholders":
		return starlark.NewBuiltin(name, checkPlaceholders), nil
	case "configuration", "host_configuration":
		return c.configuration(), nil
	case "coverage_instrumented":
		// rbs collects no coverage: no target is instrumented.
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var target starlark.Value
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "target?", &target); err != nil {
				return nil, err
			}
			return starlark.False, nil
		}), nil
	case "created_actions":
		// As in Bazel for a rule without _skylark_testable.
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			return starlark.None, starlark.UnpackArgs(b.Name(), args, kwargs)
		}), nil
	case "default_provider":
		return defaultInfo, nil
	case "expand":
		// Bazel 4.2.3's old form of expand_location.
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var s string
			var files, l starlark.Value
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "filename", &s, "files", &files, "label", &l); err != nil {
				return nil, err
			}
			out, err := c.expandLocation(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", b.Name(), err)
			}
			return starlark.String(out), nil
		}), nil
	case "expand_make_variables":
		return starlark.NewBuiltin(name, c.expandMakeVariables), nil
	case "info_file", "version_file":
		return c.an.statusFile(name == "info_file"), nil
	case "host_fragments":
		return c.Attr("fragments")
	case "new_file":
		return starlark.NewBuiltin(name, c.newFile), nil
	case "resolve_command":
		return starlark.NewBuiltin(name, c.resolveCommand), nil
	case "resolve_tools":
		return starlark.NewBuiltin(name, c.resolveTools), nil
	case "target_platform_has_constraint":
		return starlark.NewBuiltin(name, c.targetPlatformHasConstraint), nil
	case "tokenize":
		return starlark.NewBuiltin(name, shellSplitBuiltin), nil
	}
	return nil, nil
}

// configuration is ctx.configuration.
func (c *ruleContext) configuration() starlark.Value {
	env := starlark.NewDict(1)
	env.SetKey(starlark.String("PATH"), starlark.String(defaultPath))
	env.Freeze()
	exec := strings.Contains(c.an.ws.outDir, "-exec-")
	return starlarkstruct.FromStringDict(starlark.String("configuration"), starlark.StringDict{
		"coverage_enabled":    starlark.False,
		"default_shell_env":   env,
		"host_path_separator": starlark.String(":"),
		"test_env":            starlark.NewDict(0),
		"is_tool_configuration": starlark.NewBuiltin("is_tool_configuration", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.Bool(exec), nil
		}),
	})
}

// defaultPath is the PATH actions run with.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// makeVariable is $(NAME) in a command; $$ is a dollar.
var makeVariable = regexp.MustCompile(`\$\$|\$\(([^)\s]+)\)`)

// expandMakeVariables is ctx.expand_make_variables(attribute_name,
// command, additional_substitutions): $(NAME) replaced by ctx.var's value
// or the substitutions', $$ by $; an unknown one is an error naming it.
func (c *ruleContext) expandMakeVariables(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var attr, command string
	var extra *starlark.Dict
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "attribute_name", &attr, "command", &command, "additional_substitutions", &extra); err != nil {
		return nil, err
	}
	vars := c.an.ws.makeVars()
	out, err := substituteMake(command, func(name string) (string, bool) {
		for _, d := range []*starlark.Dict{extra, vars} {
			if v, found, _ := d.Get(starlark.String(name)); found {
				s, _ := starlark.AsString(v)
				return s, true
			}
		}
		return "", false
	})
	if err != nil {
		return nil, fmt.Errorf("%s: attribute %s: %v", c.def.Label, attr, err)
	}
	return starlark.String(out), nil
}

// substituteMake replaces make variables in s with what lookup gives.
func substituteMake(s string, lookup func(string) (string, bool)) (string, error) {
	var firstErr error
	out := makeVariable.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		v, ok := lookup(name)
		if !ok && firstErr == nil {
			firstErr = fmt.Errorf("$(%s) not defined", name)
		}
		return v
	})
	return out, firstErr
}

// checkPlaceholders is ctx.check_placeholders(template, allowed_placeholders):
// whether every %{name} in template is allowed.
func checkPlaceholders(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var template string
	var allowed *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "template", &template, "allowed_placeholders", &allowed); err != nil {
		return nil, err
	}
	names, err := stringList(allowed)
	if err != nil {
		return nil, fmt.Errorf("%s: allowed_placeholders: %v", b.Name(), err)
	}
	for _, m := range placeholder.FindAllStringSubmatch(template, -1) {
		if !slices.Contains(names, m[1]) {
			return starlark.False, nil
		}
	}
	return starlark.True, nil
}

var placeholder = regexp.MustCompile(`%\{([^}]*)\}`)

// newFile is the old ctx.new_file(filename) or new_file(sibling,
// filename): declare_file.
func (c *ruleContext) newFile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var first, second starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &first, &second); err != nil {
		return nil, err
	}
	name, ok := starlark.AsString(first)
	if second != nil {
		sibling, isFile := first.(*File)
		s, isString := starlark.AsString(second)
		if !isFile || !isString {
			return nil, fmt.Errorf("%s: want (filename) or (sibling file, filename)", b.Name())
		}
		rel := strings.TrimPrefix(sibling.ShortPath, c.pkg.Name+"/")
		if i := strings.LastIndex(rel, "/"); i >= 0 {
			s = rel[:i+1] + s
		}
		name, ok = s, true
	}
	if !ok {
		return nil, fmt.Errorf("%s: want a file name, got %s", b.Name(), first.Type())
	}
	return c.declare(name, false)
}

// targetPlatformHasConstraint is ctx.target_platform_has_constraint(
// constraint_value): whether the target platform has it.
func (c *ruleContext) targetPlatformHasConstraint(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v *ProviderInstance
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	if v.p != platformCommon.Members["ConstraintValueInfo"].(*Provider) {
		return nil, fmt.Errorf("%s: want a ConstraintValueInfo, got %s", b.Name(), v.p.name)
	}
	p, err := c.an.ws.targetPlatform()
	if err != nil {
		return nil, err
	}
	return starlark.Bool(p.satisfies(constraintFrom(v))), nil
}

// toolManifest is an input manifest resolve_tools and resolve_command
// give: the runfiles tree of a tool, which an action given it in
// input_manifests has beside the tool.
type toolManifest struct {
	tool *File
	tree []Runfile
}

func (m toolManifest) String() string        { return "<runfiles of " + m.tool.ShortPath + ">" }
func (m toolManifest) Type() string          { return "RunfilesSupplier" }
func (m toolManifest) Freeze()               {}
func (m toolManifest) Truth() starlark.Bool  { return true }
func (m toolManifest) Hash() (uint32, error) { return starlark.String(m.tool.Path()).Hash() }

// toolInputs are the files of tools (targets), their executables'
// runfiles among them, and those runfiles trees as input manifests.
func (c *ruleContext) toolInputs(fn string, tools starlark.Value) ([]*File, []starlark.Value, error) {
	var files []*File
	var manifests []starlark.Value
	iter, ok := tools.(starlark.Iterable)
	if tools == nil || tools == starlark.None {
		return nil, nil, nil
	}
	if !ok {
		return nil, nil, fmt.Errorf("%s: tools: want a list of targets, got %s", fn, tools.Type())
	}
	it := iter.Iterate()
	defer it.Done()
	var x starlark.Value
	for it.Next(&x) {
		t, ok := x.(*Target)
		if !ok {
			return nil, nil, fmt.Errorf("%s: tools: want targets, got %s", fn, x.Type())
		}
		files = append(files, t.configured.Files...)
		if exe := t.configured.Executable; exe != nil {
			if tree := c.an.runfile[exe.Path()]; len(tree) > 0 {
				files = append(files, RunfileFiles(tree)...)
				manifests = append(manifests, toolManifest{tool: exe, tree: tree})
			}
		}
	}
	seen := map[*File]bool{}
	files = slices.DeleteFunc(files, func(f *File) bool {
		dup := seen[f]
		seen[f] = true
		return dup
	})
	return files, manifests, nil
}

// resolveTools is ctx.resolve_tools(tools): (a depset of the tools' files
// with their runfiles, their runfiles trees as input manifests).
func (c *ruleContext) resolveTools(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var tools starlark.Value = starlark.NewList(nil)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "tools?", &tools); err != nil {
		return nil, err
	}
	files, manifests, err := c.toolInputs(b.Name(), tools)
	if err != nil {
		return nil, err
	}
	return starlark.Tuple{newDepset(files), starlark.NewList(manifests)}, nil
}

// resolveCommand is ctx.resolve_command: (the tools' files, the argv
// that runs command with bash, the tools' input manifests), with
// $(location) of the tools and label_dict's labels and make_variables'
// $(NAME) expanded when asked.
func (c *ruleContext) resolveCommand(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var command, attribute string
	var expandLocations bool
	var makeVars, labelDict, reqs starlark.Value
	var tools starlark.Value = starlark.NewList(nil)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "command?", &command, "attribute?", &attribute, "expand_locations?", &expandLocations,
		"make_variables?", &makeVars, "tools?", &tools, "label_dict?", &labelDict, "execution_requirements?", &reqs); err != nil {
		return nil, err
	}
	files, manifests, err := c.toolInputs(b.Name(), tools)
	if err != nil {
		return nil, err
	}
	if expandLocations {
		if command, err = c.expandLocation(command); err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
	}
	if d, ok := makeVars.(*starlark.Dict); ok {
		if command, err = substituteMake(command, func(name string) (string, bool) {
			v, found, _ := d.Get(starlark.String(name))
			s, _ := starlark.AsString(v)
			return s, found
		}); err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
	}
	inputs := make([]starlark.Value, len(files))
	for i, f := range files {
		inputs[i] = f
	}
	argv := starlark.NewList([]starlark.Value{starlark.String("/bin/bash"), starlark.String("-c"), starlark.String(command)})
	return starlark.Tuple{starlark.NewList(inputs), argv, starlark.NewList(manifests)}, nil
}

// withManifests gives act the runfiles trees of the input manifests v,
// which resolve_tools and resolve_command made.
func (c *ruleContext) withManifests(act *Action, v starlark.Value) error {
	l, ok := v.(*starlark.List)
	if v == nil || v == starlark.None {
		return nil
	}
	if !ok {
		return fmt.Errorf("input_manifests: want a list, got %s", v.Type())
	}
	for i := 0; i < l.Len(); i++ {
		m, ok := l.Index(i).(toolManifest)
		if !ok {
			return fmt.Errorf("input_manifests: want what resolve_tools or resolve_command gives, got %s", l.Index(i).Type())
		}
		addTree(act, m.tool, m.tree)
	}
	return nil
}

// statusFile is ctx.info_file (stable) or ctx.version_file: the workspace
// status files Bazel writes, rbs-out/stable-status.txt (BUILD_EMBED_LABEL,
// BUILD_HOST, BUILD_USER) and rbs-out/volatile-status.txt
// (BUILD_TIMESTAMP, the build's start in seconds), written once per
// build by an action of their own.
func (an *analyzer) statusFile(stable bool) *File {
	name, content := "volatile-status.txt", fmt.Sprintf("BUILD_TIMESTAMP %d\n", an.started.Unix())
	if stable {
		host, _ := os.Hostname()
		user := os.Getenv("USER")
		if u, err := osuser.Current(); err == nil {
			user = u.Username
		}
		name, content = "stable-status.txt", fmt.Sprintf("BUILD_EMBED_LABEL \nBUILD_HOST %s\nBUILD_USER %s\n", host, user)
	}
	f := &File{ShortPath: name, Generated: true, Bin: "rbs-out"}
	if a := an.actions[f.Path()]; a != nil {
		return a.Outputs[0]
	}
	an.actions[f.Path()] = &Action{Mnemonic: "WorkspaceStatus", Outputs: []*File{f}, Write: true, Content: content}
	an.byFile[f.Path()] = f
	return f
}
