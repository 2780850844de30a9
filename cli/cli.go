// Package cli holds the kong command structs of the rbs command line, one
// file per command group. Each command's Run only parses, calls a package
// and prints.
package cli

import (
	"errors"
	"fmt"
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

	VersionCmd VersionCmd `cmd:"" name:"version" help:"Print the version, as --version does."`
}

// VersionCmd is `rbs version`.
type VersionCmd struct{}

// Run implements the command.
func (VersionCmd) Run() error {
	fmt.Println(Version())
	return nil
}

// Options returns the kong options of the rbs command line.
func Options() []kong.Option {
	return []kong.Option{
		kong.Name("rbs"),
		kong.Description("rbs: a Starlark build tool, a remote execution cluster, and a batch scheduler."),
		kong.Vars{"version": Version(), "worker_cache": units.Size(defaultWorkerCache).String()},
	}
}

// Parse reads rbs's command line: Args rewrites it, then k parses it. A
// command line used wrongly (an unknown flag, a bad value, a missing
// argument, a bad #RBS line) is an error of one line, kong's suggestion
// included, that names the command whose --help shows its usage, with exit
// status 2, as most commands use; the usage itself is never printed
// unasked.
func Parse(k *kong.Kong, args []string) (*kong.Context, error) {
	args, err := Args(args)
	if err != nil {
		return nil, exitError{err, usageStatus}
	}
	ctx, err := k.Parse(args)
	if err != nil {
		cmd := k.Model.Name
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context.Selected() != nil {
			cmd = pe.Context.Selected().FullPath()
		}
		return nil, exitError{fmt.Errorf("%w (see %s --help)", err, cmd), usageStatus}
	}
	return ctx, nil
}

// usageStatus is the exit status of a command line used wrongly.
const usageStatus = 2

// exitError is a failure that sets rbs's exit status: a program's or a
// job's, passed on, or usageStatus.
type exitError struct {
	err  error
	code int
}

func (e exitError) Error() string { return e.err.Error() }

func (e exitError) Unwrap() error { return e.err }

// ExitCode is the status rbs exits with (kong.ExitCoder).
func (e exitError) ExitCode() int { return e.code }

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
	Server    string `help:"Server address: HOST:PORT, grpc://HOST:PORT or grpcs://HOST:PORT, or a comma-separated list of a cluster's servers." env:"RBS_REMOTE" placeholder:"ADDR"`
	TokenFile string `name:"token-file" help:"File holding the server's bearer token (default: $RBS_REMOTE_TOKEN)." type:"existingfile" placeholder:"FILE"`
	TLSCA     string `name:"tls-ca" help:"PEM file of the CA that signed the server's certificate (grpcs:// servers)." type:"existingfile" placeholder:"FILE"`
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
