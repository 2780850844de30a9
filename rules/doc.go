// Package rules is the rule API of the rbs build tool and its analysis: a
// Workspace evaluates BUILD files into Packages of targets declared with
// rule() and attr.*, and analysis runs each rule's implementation with ctx,
// ctx.actions, providers, DefaultInfo, depset and runfiles, producing
// Configured targets and the Actions that build them. The built-in rules
// (genrule, filegroup, sh_*, py_*) are Starlark files embedded here and
// served as the @rbs repository.
package rules
