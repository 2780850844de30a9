// Package cli holds the kong command structs of the rbs command line, one
// file per command group. Each command's Run only parses, calls a package
// and prints.
package cli

import (
	"os"
	"runtime/debug"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/client"
)

// version is set at link time with -ldflags "-X github.com/rbs-build/rbs/cli.version=...".
var version = ""

// CLI is the root of the command tree.
type CLI struct {
	Version kong.VersionFlag `help:"Print the version and exit."`

	Build BuildCmd `cmd:"" help:"Build targets."`
	Test  TestCmd  `cmd:"" help:"Build and run test targets."`
	Run   RunCmd   `cmd:"" help:"Build and run one executable target."`
	Query QueryCmd `cmd:"" help:"Query the target graph."`
	Clean CleanCmd `cmd:"" help:"Remove build outputs."`

	Remote RemoteCmd `cmd:"" help:"Run or inspect an rbs cluster (scheduler, CAS, workers)."`
	Job    JobCmd    `cmd:"" help:"Submit and manage batch jobs."`
}

// Options returns the kong options of the rbs command line.
func Options() []kong.Option {
	return []kong.Option{
		kong.Name("rbs"),
		kong.Description("rbs: a Starlark build tool, a remote execution cluster, and a batch scheduler."),
		kong.UsageOnError(),
		kong.Vars{"version": Version(), "worker_cache": units.Size(defaultWorkerCache).String()},
	}
}

// Version is the rbs version: the link-time version, else the module
// version, else "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// RemoteFlags are how client commands reach a server. The token comes
// from a file or the environment, never from the command line, where other
// users of the machine could read it.
type RemoteFlags struct {
	Server    string `help:"Server address: HOST:PORT, grpc://HOST:PORT or grpcs://HOST:PORT, or a comma-separated list of a cluster's servers." env:"RBS_REMOTE"`
	TokenFile string `name:"token-file" help:"File holding the server's bearer token (default: $RBS_REMOTE_TOKEN)." type:"existingfile"`
	TLSCA     string `name:"tls-ca" help:"PEM file of the CA that signed the server's certificate (grpcs:// servers)." type:"existingfile"`
}

// tokenEnv names the variable holding the user token.
const tokenEnv = "RBS_REMOTE_TOKEN"

func (f RemoteFlags) options() client.Options {
	return client.Options{Target: f.Server, Token: os.Getenv(tokenEnv), TokenFile: f.TokenFile, CACert: f.TLSCA}
}

// secret returns the token in file when one is given, else the value of
// the environment variable env ("" when neither is set).
func secret(file, env string) (string, error) {
	if file != "" {
		return auth.ReadTokenFile(file)
	}
	return os.Getenv(env), nil
}
