package rules

import (
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Args is ctx.actions.args(): a command line built up by add calls, as
// Bazel's Args builds it, and written to a param file when it asks for one
// (use_param_file). The directories among add_all's and add_joined's
// values are expanded, as Bazel expands them (expand_directories), when
// the action runs: until then the Args is late, and holds them as
// themselves.
type Args struct {
	items []string
	// late makes items again with the directories expanded; nil when
	// nothing is to be expanded.
	late []lateWords
	// paramArg is use_param_file's argument ("@%s"), "" when the args go
	// on the command line; paramAlways is its use_always.
	paramArg    string
	paramAlways bool
	// paramFormat is set_param_file_format's: shell (the default),
	// multiline or flag_per_line.
	paramFormat string
	frozen      bool
}

var _ starlark.HasAttrs = (*Args)(nil)

func newArgs(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return &Args{paramFormat: "shell"}, nil
}

// Expander lists the files a directory output holds, once the action that
// makes it has run.
type Expander func(dir *File) ([]*File, error)

// lateWords makes the words of items[at:at+n] with the directories
// expanded.
type lateWords struct {
	at, n int
	dirs  []*File
	words func(Expander) ([]string, error)
}

// Expanded is the command line with the directories expanded by list.
func (a *Args) Expanded(list Expander) ([]string, error) {
	if len(a.late) == 0 {
		return a.items, nil
	}
	var out []string
	next := 0
	for _, l := range a.late {
		out = append(out, a.items[next:l.at]...)
		words, err := l.words(list)
		if err != nil {
			return nil, err
		}
		out = append(out, words...)
		next = l.at + l.n
	}
	return append(out, a.items[next:]...), nil
}

func (a *Args) String() string        { return fmt.Sprintf("Args(%q)", a.items) }
func (a *Args) Type() string          { return "Args" }
func (a *Args) Freeze()               { a.frozen = true }
func (a *Args) Truth() starlark.Bool  { return true }
func (a *Args) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Args") }
func (a *Args) AttrNames() []string {
	return []string{"add", "add_all", "add_joined", "set_param_file_format", "use_param_file"}
}

func (a *Args) Attr(name string) (starlark.Value, error) {
	var fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)
	switch name {
	case "add":
		fn = a.add
	case "add_all":
		fn = a.addAll
	case "add_joined":
		fn = a.addJoined
	case "use_param_file":
		fn = a.useParamFile
	case "set_param_file_format":
		fn = a.setParamFileFormat
	default:
		return nil, nil
	}
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if a.frozen {
			return nil, fmt.Errorf("%s: this Args is frozen: it was made by another rule's analysis", b.Name())
		}
		return fn(thread, b, args, kwargs)
	}), nil
}

// add is Args.add(arg_name_or_value, value, format).
func (a *Args) add(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var first, value starlark.Value
	var format starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "arg_name_or_value", &first, "value?", &value, "format?", &format); err != nil {
		return nil, err
	}
	f, err := formatString(b.Name(), "format", format)
	if err != nil {
		return nil, err
	}
	if value != nil {
		a.items = append(a.items, argString(first))
	} else {
		value = first
	}
	switch value.(type) {
	case *Depset, *starlark.List, *starlark.Tuple:
		return nil, fmt.Errorf("%s: a %s is not one value: use add_all or add_joined", b.Name(), value.Type())
	}
	a.items = append(a.items, f.apply(argString(value)))
	return starlark.None, nil
}

// vector is what add_all and add_joined share: their values, made strings
// as Bazel makes them (map_each, then uniquify, then format_each).
type vector struct {
	name, values starlark.Value
	mapEach      starlark.Value
	formatEach   starlark.Value
	omitIfEmpty  bool
	uniquify     bool
	expandDirs   bool
	allowClosure bool
}

func (v *vector) params(more ...any) []any {
	return append([]any{"arg_name_or_values", &v.name, "values?", &v.values, "map_each?", &v.mapEach, "format_each?", &v.formatEach,
		"omit_if_empty?", &v.omitIfEmpty, "uniquify?", &v.uniquify, "expand_directories?", &v.expandDirs, "allow_closure?", &v.allowClosure}, more...)
}

// list returns the flag name ("" for none) and the values.
func (v *vector) list(fn string) (string, []starlark.Value, error) {
	values, flag := v.name, ""
	if v.values != nil {
		flag, values = argString(v.name), v.values
	}
	var list []starlark.Value
	switch x := values.(type) {
	case *Depset:
		list = x.ToList()
	case starlark.Indexable:
		for i := 0; i < x.Len(); i++ {
			list = append(list, x.Index(i))
		}
	default:
		return "", nil, fmt.Errorf("%s: want a list or depset of values, got %s", fn, values.Type())
	}
	return flag, list, nil
}

// strings is what the values in list make: map_each (given expand as its
// directory expander), then uniquify, then format_each.
func (v *vector) strings(thread *starlark.Thread, fn string, list []starlark.Value, expand Expander) ([]string, error) {
	format, err := formatString(fn, "format_each", v.formatEach)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range list {
		if v.mapEach == nil || v.mapEach == starlark.None {
			out = append(out, argString(x))
			continue
		}
		mapped, err := mapEach(thread, fn, v.mapEach, x, expand)
		if err != nil {
			return nil, err
		}
		out = append(out, mapped...)
	}
	if v.uniquify {
		seen := map[string]bool{}
		out = slices.DeleteFunc(out, func(s string) bool {
			dup := seen[s]
			seen[s] = true
			return dup
		})
	}
	for i := range out {
		out[i] = format.apply(out[i])
	}
	return out, nil
}

// expandDirectories is list with each directory output replaced by the
// files it holds, as expand lists them.
func expandDirectories(list []starlark.Value, expand Expander) ([]starlark.Value, error) {
	var out []starlark.Value
	for _, x := range list {
		f, ok := x.(*File)
		if !ok || !f.IsDirectory {
			out = append(out, x)
			continue
		}
		files, err := expand(f)
		if err != nil {
			return nil, err
		}
		for _, g := range files {
			out = append(out, g)
		}
	}
	return out, nil
}

// mapEach calls map_each on one value: it returns None (nothing), a string
// or a list of strings. A function of two parameters is given Bazel's
// directory expander as well, which lists directories with expand.
func mapEach(thread *starlark.Thread, fn string, f, x starlark.Value, expand Expander) ([]string, error) {
	callable, ok := f.(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("%s: map_each must be a function, got %s", fn, f.Type())
	}
	args := starlark.Tuple{x}
	if sf, ok := f.(*starlark.Function); ok && sf.NumParams() == 2 {
		args = append(args, directoryExpander(expand))
	}
	ret, err := starlark.Call(thread, callable, args, nil)
	if err != nil {
		return nil, err
	}
	switch r := ret.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.String:
		return []string{string(r)}, nil
	case *starlark.List:
		out := make([]string, r.Len())
		for i := range out {
			s, ok := r.Index(i).(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: map_each returned a list holding a %s; want strings", fn, r.Index(i).Type())
			}
			out[i] = string(s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: map_each must return None, a string or a list of strings, got %s", fn, ret.Type())
}

// directoryExpander is the second argument of a map_each of two
// parameters: expand(file) gives the files a directory holds, and a file
// itself otherwise. A directory's contents are known only once the action
// that makes it has run: during analysis (expand nil) a directory is given
// as itself.
func directoryExpander(list Expander) starlark.Value {
	expand := starlark.NewBuiltin("expand", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var f *File
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &f); err != nil {
			return nil, err
		}
		if !f.IsDirectory || list == nil {
			return starlark.NewList([]starlark.Value{f}), nil
		}
		files, err := list(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
		out := make([]starlark.Value, len(files))
		for i, g := range files {
			out[i] = g
		}
		return starlark.NewList(out), nil
	})
	return starlarkstruct.FromStringDict(starlark.String("DirectoryExpander"), starlark.StringDict{"expand": expand})
}

// addTo appends to a the flag and what words makes of the values' strings,
// unless there are none and omit_if_empty says to add nothing.
func (v *vector) addTo(thread *starlark.Thread, fn string, a *Args, words func([]string) []string) (starlark.Value, error) {
	flag, list, err := v.list(fn)
	if err != nil {
		return nil, err
	}
	build := func(thread *starlark.Thread, list []starlark.Value, expand Expander) ([]string, error) {
		items, err := v.strings(thread, fn, list, expand)
		if err != nil || len(items) == 0 && v.omitIfEmpty {
			return nil, err
		}
		if flag != "" {
			return append([]string{flag}, words(items)...), nil
		}
		return words(items), nil
	}
	now, err := build(thread, list, nil)
	if err != nil {
		return nil, err
	}
	if v.expandDirs && slices.ContainsFunc(list, isDirectory) {
		var dirs []*File
		for _, x := range list {
			if isDirectory(x) {
				dirs = append(dirs, x.(*File))
			}
		}
		a.late = append(a.late, lateWords{at: len(a.items), n: len(now), dirs: dirs, words: func(expand Expander) ([]string, error) {
			expanded, err := expandDirectories(list, expand)
			if err != nil {
				return nil, err
			}
			return build(&starlark.Thread{Name: fn}, expanded, expand)
		}})
	}
	a.items = append(a.items, now...)
	return starlark.None, nil
}

// isDirectory says whether x is a directory output (declare_directory).
func isDirectory(x starlark.Value) bool {
	f, ok := x.(*File)
	return ok && f.IsDirectory
}

// addAll is Args.add_all.
func (a *Args) addAll(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v := vector{omitIfEmpty: true, expandDirs: true}
	var before, terminate starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, v.params("before_each?", &before, "terminate_with?", &terminate)...); err != nil {
		return nil, err
	}
	return v.addTo(thread, b.Name(), a, func(items []string) []string {
		var out []string
		beforeEach, _ := starlark.AsString(before)
		for _, s := range items {
			if before != starlark.None {
				out = append(out, beforeEach)
			}
			out = append(out, s)
		}
		if t, ok := starlark.AsString(terminate); ok {
			out = append(out, t)
		}
		return out
	})
}

// addJoined is Args.add_joined.
func (a *Args) addJoined(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	v := vector{omitIfEmpty: true, expandDirs: true}
	var join string
	var formatJoined starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, v.params("join_with", &join, "format_joined?", &formatJoined)...); err != nil {
		return nil, err
	}
	f, err := formatString(b.Name(), "format_joined", formatJoined)
	if err != nil {
		return nil, err
	}
	return v.addTo(thread, b.Name(), a, func(items []string) []string {
		return []string{f.apply(strings.Join(items, join))}
	})
}

func (a *Args) useParamFile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var arg string
	var always bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "param_file_arg", &arg, "use_always?", &always); err != nil {
		return nil, err
	}
	if strings.Count(arg, "%s") != 1 {
		return nil, fmt.Errorf("%s: param_file_arg %q must hold %%s once, where the file's path goes", b.Name(), arg)
	}
	a.paramArg, a.paramAlways = arg, always
	return a, nil
}

func (a *Args) setParamFileFormat(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var format string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "format", &format); err != nil {
		return nil, err
	}
	switch format {
	case "shell", "multiline", "flag_per_line":
	default:
		return nil, fmt.Errorf("%s: format %q: want shell, multiline or flag_per_line", b.Name(), format)
	}
	a.paramFormat = format
	return a, nil
}

// fileContent is items, the args, as a param file holds them, in their format:
// shell, an argument a line, quoted as a shell needs; multiline, as they
// are; flag_per_line, as Bazel 4.2.3 writes it, the first argument, "="
// and the others joined by spaces, on one line.
func (a *Args) fileContent(items []string) string {
	var b strings.Builder
	switch a.paramFormat {
	case "flag_per_line":
		if len(items) > 0 {
			b.WriteString(items[0])
			if len(items) > 1 {
				b.WriteString("=" + strings.Join(items[1:], " "))
			}
			b.WriteString("\n")
		}
	case "multiline":
		for _, s := range items {
			b.WriteString(s + "\n")
		}
	default:
		for _, s := range items {
			b.WriteString(shellQuote(s) + "\n")
		}
	}
	return b.String()
}

// writeAction is the action that writes the args, in their format, to
// out: when it runs, after the directories they expand are made, if they
// expand any.
func (a *Args) writeAction(out *File, executable bool) *Action {
	act := &Action{Mnemonic: "FileWrite", Outputs: []*File{out}, Write: true, Content: a.fileContent(a.items), Executable: executable}
	for _, l := range a.late {
		act.Inputs = append(act.Inputs, l.dirs...)
	}
	if len(a.late) > 0 {
		act.LateContent = func(list Expander) (string, error) {
			items, err := a.Expanded(list)
			return a.fileContent(items), err
		}
	}
	return act
}

// shellQuote quotes s for a shell as Bazel's ShellEscaper does: as it is
// when every character is safe, else in single quotes.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("@%-_+:,./", c)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// paramFileThreshold is the length of a command line past which an Args
// that asks for a param file (without use_always) gets one: Bazel's
// default --min_param_file_size.
const paramFileThreshold = 32768

// paramFiles writes to param files the parts of act's command line (parts,
// from the list l) whose Args ask for one, when they say always or the
// whole command line is longer than paramFileThreshold: each part becomes
// its param_file_arg with the file's path, and the file, named after act's
// first output as Bazel names it (OUTPUT-0.params, -1, …), an input of
// act written by an action of this target. A part so replaced leaves late,
// the parts that expand directories when act runs: its file does.
func (c *ruleContext) paramFiles(act *Action, l *starlark.List, parts [][]string, withFiles []int, late map[int]*Args) error {
	total := 0
	for _, s := range act.Args {
		total += len(s) + 1
	}
	for _, p := range parts {
		for _, s := range p {
			total += len(s) + 1
		}
	}
	if len(act.Outputs) == 0 {
		return fmt.Errorf("a param file is named after its action's first output, and this action has none")
	}
	first := act.Outputs[0]
	for n, i := range withFiles {
		args := l.Index(i).(*Args)
		if !args.paramAlways && total <= paramFileThreshold {
			continue
		}
		name := strings.TrimPrefix(fmt.Sprintf("%s-%d.params", first.ShortPath, n), c.pkg.Name+"/")
		f, err := c.declare(name, false)
		if err != nil {
			return err
		}
		if err := c.addAction(args.writeAction(f, false)); err != nil {
			return err
		}
		act.Inputs = append(act.Inputs, f)
		parts[i] = []string{strings.Replace(args.paramArg, "%s", f.Path(), 1)}
		delete(late, i)
	}
	return nil
}

// format is a format string of Args ("--x=%s"), or none.
type format string

// formatString checks an Args format: None, or a string holding %s once.
func formatString(fn, param string, v starlark.Value) (format, error) {
	if v == nil || v == starlark.None {
		return "", nil
	}
	s, ok := starlark.AsString(v)
	if !ok {
		return "", fmt.Errorf("%s: %s must be a string, got %s", fn, param, v.Type())
	}
	if strings.Count(s, "%s") != 1 {
		return "", fmt.Errorf("%s: %s %q must hold %%s once", fn, param, s)
	}
	return format(s), nil
}

func (f format) apply(s string) string {
	if f == "" {
		return s
	}
	return strings.Replace(string(f), "%s", s, 1)
}

// argString is a value as Args and arguments lists give it: a string as it
// is, a File as its path, a bool as Bazel writes it (true, false), a Label
// in its canonical form, anything else as str() gives it.
func argString(v starlark.Value) string {
	switch x := v.(type) {
	case starlark.String:
		return string(x)
	case *File:
		return x.Path()
	case starlark.Bool:
		if x {
			return "true"
		}
		return "false"
	}
	return v.String()
}
