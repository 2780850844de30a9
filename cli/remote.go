package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/cluster"
)

// RemoteCmd is `rbs remote`.
type RemoteCmd struct {
	Serve  RemoteServeCmd  `cmd:"" help:"Run the scheduler, CAS and action cache on one gRPC port."`
	Worker RemoteWorkerCmd `cmd:"" help:"Join this machine to a cluster as a worker."`
	Status RemoteStatusCmd `cmd:"" help:"Show workers, queue depth and jobs."`
}

// RemoteServeCmd is `rbs remote serve`.
type RemoteServeCmd struct {
	Listen     string     `help:"Address to listen on (port 0 picks a free one)." default:":8980"`
	DataDir    string     `help:"Directory for the CAS, action cache and state (default: $XDG_DATA_HOME/rbs)." type:"path"`
	CASMaxSize units.Size `name:"cas-max-size" help:"Bound on the CAS's size; least recently used blobs are evicted beyond it." default:"50GiB"`
	ACMaxSize  units.Size `name:"ac-max-size" help:"Bound on the action cache's size." default:"1GiB"`
	Token      string     `help:"Require this bearer token on every call." env:"RBS_REMOTE_TOKEN"`
	TLSCert    string     `name:"tls-cert" help:"PEM certificate to serve TLS with." type:"existingfile"`
	TLSKey     string     `name:"tls-key" help:"PEM private key of --tls-cert." type:"existingfile"`
}

// Run implements the command.
func (c *RemoteServeCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	return cluster.Serve(ctx, cluster.Config{
		Listen:     c.Listen,
		DataDir:    c.DataDir,
		CASMaxSize: int64(c.CASMaxSize),
		ACMaxSize:  int64(c.ACMaxSize),
		Token:      c.Token,
		TLSCert:    c.TLSCert,
		TLSKey:     c.TLSKey,
		Log:        log,
		Ready: func(addr net.Addr) {
			fmt.Fprintf(os.Stderr, "rbs remote serve: listening on %s\n", addr)
		},
	})
}

// RemoteWorkerCmd is `rbs remote worker`.
type RemoteWorkerCmd struct {
	RemoteFlags
}

// Run implements the command.
func (c *RemoteWorkerCmd) Run() error { return notImplemented("remote worker") }

// RemoteStatusCmd is `rbs remote status`.
type RemoteStatusCmd struct {
	RemoteFlags
	JSON bool `help:"Print JSON."`
}

// Run implements the command.
func (c *RemoteStatusCmd) Run() error { return notImplemented("remote status") }
