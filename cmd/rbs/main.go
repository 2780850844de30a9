// Command rbs is a Starlark build tool, a Remote Execution API cluster and a
// batch scheduler in one binary.
package main

import (
	"os"

	"github.com/rbs-build/rbs/cli"
)

func main() {
	var c cli.CLI
	parser, ctx, err := cli.Parse(&c, os.Args[1:])
	parser.FatalIfErrorf(err)
	ctx.FatalIfErrorf(ctx.Run())
}
