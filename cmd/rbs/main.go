// Command rbs is a Starlark build tool, a Remote Execution API cluster and a
// batch scheduler in one binary.
package main

import (
	"os"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/cli"
)

func main() {
	var c cli.CLI
	parser := kong.Must(&c, cli.Options()...)
	ctx, err := cli.Parse(parser, os.Args[1:])
	parser.FatalIfErrorf(err)
	ctx.FatalIfErrorf(ctx.Run())
}
