package cli

// BuildCmd is `rbs build`.
type BuildCmd struct {
	Patterns []string `arg:"" optional:"" help:"Target patterns such as //app:train or //...."`
}

// Run implements the command.
func (c *BuildCmd) Run() error { return notImplemented("build") }

// TestCmd is `rbs test`.
type TestCmd struct {
	Patterns []string `arg:"" optional:"" help:"Test target patterns."`
}

// Run implements the command.
func (c *TestCmd) Run() error { return notImplemented("test") }

// RunCmd is `rbs run`.
type RunCmd struct {
	Target string   `arg:"" help:"The executable target to run."`
	Args   []string `arg:"" optional:"" passthrough:"" help:"Arguments for the program, after --."`
}

// Run implements the command.
func (c *RunCmd) Run() error { return notImplemented("run") }

// QueryCmd is `rbs query`.
type QueryCmd struct {
	Expr string `arg:"" help:"Query expression: a pattern, deps(//x) or kind(rule, //...)."`
}

// Run implements the command.
func (c *QueryCmd) Run() error { return notImplemented("query") }

// CleanCmd is `rbs clean`.
type CleanCmd struct{}

// Run implements the command.
func (c *CleanCmd) Run() error { return notImplemented("clean") }
