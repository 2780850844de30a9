// Command rbs is a Starlark build tool, a Remote Execution API cluster and a
// batch scheduler in one binary.
package main

import (
	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/cli"
)

func main() {
	var c cli.CLI
	ctx := kong.Parse(&c, cli.Options()...)
	ctx.FatalIfErrorf(ctx.Run())
}
