package rules

import (
	"fmt"

	"go.starlark.net/starlark"
)

// actionValue is an action as Starlark sees it in target.actions, the
// fields of Bazel's Action object that analysis tests read: mnemonic,
// argv, env, inputs, outputs, and content (ctx.actions.write) or
// substitutions (ctx.actions.expand_template).
type actionValue struct {
	a *Action
}

var _ starlark.HasAttrs = actionValue{}

func (v actionValue) String() string        { return fmt.Sprintf("<action %s>", v.a.Description()) }
func (v actionValue) Type() string          { return "Action" }
func (v actionValue) Freeze()               {}
func (v actionValue) Truth() starlark.Bool  { return true }
func (v actionValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Action") }
func (v actionValue) AttrNames() []string {
	return []string{"argv", "content", "env", "inputs", "mnemonic", "outputs", "substitutions"}
}

func (v actionValue) Attr(name string) (starlark.Value, error) {
	a := v.a
	switch name {
	case "mnemonic":
		return starlark.String(a.Mnemonic), nil
	case "argv":
		// None for the actions that run no process, as in Bazel.
		if a.Write || a.Copy != nil {
			return starlark.None, nil
		}
		argv := make([]starlark.Value, len(a.Args))
		for i, s := range a.Args {
			argv[i] = starlark.String(s)
		}
		return starlark.NewList(argv), nil
	case "env":
		d := starlark.NewDict(len(a.Env))
		for _, k := range sortedStrings(a.Env) {
			d.SetKey(starlark.String(k), starlark.String(a.Env[k]))
		}
		return d, nil
	case "inputs":
		return newDepset(a.Inputs), nil
	case "outputs":
		return newDepset(a.Outputs), nil
	case "content":
		// Known at analysis only for a write: a template is read when its
		// action runs.
		if !a.Write {
			return starlark.None, nil
		}
		return starlark.String(a.Content), nil
	case "substitutions":
		if a.Mnemonic != templateMnemonic {
			return starlark.None, nil
		}
		d := starlark.NewDict(len(a.Substitutions))
		for _, s := range a.Substitutions {
			d.SetKey(starlark.String(s.Key), starlark.String(s.Value))
		}
		return d, nil
	}
	return nil, nil
}

// actionList is target.actions: the actions the target registered, in
// order.
func actionList(c *Configured) *starlark.List {
	out := make([]starlark.Value, len(c.Actions))
	for i, a := range c.Actions {
		out[i] = actionValue{a}
	}
	return starlark.NewList(out)
}
