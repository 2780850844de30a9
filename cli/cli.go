// Package cli holds the kong command structs of the rbs command line, one
// file per command group. Each command's Run only parses, calls a package
// and prints.
package cli

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/client"
)

// version is set at link time with -ldflags "-X github.com/rbs-build/rbs/cli.version=...".
var version = ""

// CLI is the root of the command tree.
type CLI struct {
	Globals `embed:""`

	Build BuildCmd `cmd:"" help:"Build targets."`
	Test  TestCmd  `cmd:"" help:"Build and run test targets."`
	Run   RunCmd   `cmd:"" help:"Build and run one executable target."`
	Query QueryCmd `cmd:"" help:"Query the target graph."`
	Clean CleanCmd `cmd:"" help:"Remove build outputs."`

	Remote RemoteCmd `cmd:"" help:"Run or inspect an rbs cluster (scheduler, CAS, workers)."`
	Job    JobCmd    `cmd:"" help:"Submit and manage batch jobs."`

	VersionCmd VersionCmd `cmd:"" name:"version" help:"Print the version, as --version does."`
}

// Globals are the flags of the root, which every command takes.
type Globals struct {
	Version kong.VersionFlag `help:"Print the version and exit."`
}

// New returns the parser of the command line args into c, and what to call
// once it has parsed them. When args begin with the name of a command
// group (rbs job ...), the grammar holds that group alone, and when they go
// on with the name of one of its commands (rbs job submit ...), that command
// alone, whose values done copies into c: a command does not pay to build
// every other command's grammar, most of what starting the command line
// costs. Otherwise (rbs --help, a misspelt command) the grammar holds every
// group, and for rbs --version none.
func New(c *CLI, args []string, opts ...kong.Option) (k *kong.Kong, done func(), err error) {
	opts = append(Options(), opts...)
	done = func() {}
	if len(args) == 1 && args[0] == "--version" {
		k, err = kong.New(&c.Globals, opts...)
		return k, done, err
	}
	root := reflect.ValueOf(c).Elem()
	f, ok := command(root.Type(), args)
	if !ok {
		k, err = kong.New(c, opts...)
		return k, done, err
	}
	group := root.FieldByIndex(f.Index)
	target := group.Addr().Interface()
	if cmd, ok := command(group.Type(), args[1:]); ok && onlyCommands(group.Type()) {
		one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: cmd.Name, Type: cmd.Type, Tag: cmd.Tag}})).Elem()
		target = one.Addr().Interface()
		done = func() { group.FieldByIndex(cmd.Index).Set(one.Field(0)) }
	}
	k, err = kong.New(&c.Globals, append(opts, kong.DynamicCommand(args[0], f.Tag.Get("help"), "", target))...)
	return k, done, err
}

// command finds the field of struct type t that is the command args begin
// with.
func command(t reflect.Type, args []string) (reflect.StructField, bool) {
	if len(args) == 0 || t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if _, cmd := f.Tag.Lookup("cmd"); cmd && commandName(f) == args[0] {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// onlyCommands reports whether struct type t is a group of commands and
// nothing else (no flags, no hooks), which one of its commands can stand
// for when the command line names it.
func onlyCommands(t reflect.Type) bool {
	if t.NumMethod() > 0 || reflect.PointerTo(t).NumMethod() > 0 {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if _, cmd := t.Field(i).Tag.Lookup("cmd"); !cmd {
			return false
		}
	}
	return true
}

// commandName is the name kong gives the command of field f: its name
// tag, else the field's name in lower case (every command's name that
// has no name tag is one word).
func commandName(f reflect.StructField) string {
	if name := f.Tag.Get("name"); name != "" {
		return name
	}
	return strings.ToLower(f.Name)
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

// Parse reads rbs's command line args into c: a build command's is expanded
// with the .bazelrc files (withRC), Args rewrites it, then New's
// parser parses it, which it returns. A grammar that cannot be built is a
// mistake in rbs, and panics, as kong.Must does. A command line used
// wrongly (an unknown flag, a bad value, a missing argument, a bad #RBS
// line) is an error of one line, kong's suggestion included, that names the
// command whose --help shows its usage, with exit status 2, as most
// commands use; the usage itself is never printed unasked.
func Parse(c *CLI, args []string, opts ...kong.Option) (*kong.Kong, *kong.Context, error) {
	k, done, err := New(c, args, opts...)
	if err != nil {
		panic(err)
	}
	if args, err = withRC(k, args, os.Stderr); err != nil {
		return k, nil, exitError{err, usageStatus}
	}
	args, err = Args(args)
	if err != nil {
		return k, nil, exitError{err, usageStatus}
	}
	ctx, err := k.Parse(args)
	if err != nil {
		cmd := k.Model.Name
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context.Selected() != nil {
			cmd = pe.Context.Selected().FullPath()
		}
		return k, nil, exitError{fmt.Errorf("%w (see %s --help)", err, cmd), usageStatus}
	}
	done()
	return k, ctx, nil
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
