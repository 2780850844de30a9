// Package cluster composes an rbs server from its parts: the disk-backed CAS
// and action cache under a data directory, TLS material, the execution
// scheduler, and the gRPC services. It is the one place where `rbs remote serve` is wired together.
package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/server"
)

// Config is what `rbs remote serve` is given.
type Config struct {
	Listen     string // host:port; port 0 picks a free port
	DataDir    string
	CASMaxSize int64 // bytes; 0 for no bound
	ACMaxSize  int64 // bytes; 0 for no bound
	Token      string
	TLSCert    string
	TLSKey     string
	Log        *slog.Logger
	// Ready, when set, is called with the address the server listens on
	// once it accepts connections.
	Ready func(addr net.Addr)
}

// DefaultDataDir is where a server keeps its state when no --data-dir is
// given: $XDG_DATA_HOME/rbs, or ~/.local/share/rbs.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "rbs")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "rbs")
	}
	return filepath.Join(home, ".local", "share", "rbs")
}

// Serve runs a server until ctx is done.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key must be given together")
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("loading TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	casDisk, err := blobstore.NewDisk(filepath.Join(cfg.DataDir, "cas"), cfg.CASMaxSize)
	if err != nil {
		return err
	}
	ac, err := blobstore.NewDisk(filepath.Join(cfg.DataDir, "ac"), cfg.ACMaxSize)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	sched := scheduler.New(scheduler.Config{NewID: func() string { return uuid.NewString() }})
	srv := server.New(server.Config{
		CAS:       blobstore.ContentAddressed(casDisk),
		AC:        ac,
		Token:     cfg.Token,
		TLS:       tlsCfg,
		Log:       cfg.Log,
		Scheduler: sched,
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	if cfg.Ready != nil {
		cfg.Ready(lis.Addr())
	}
	select {
	case <-ctx.Done():
		srv.Stop()
		<-done
		return nil
	case err := <-done:
		srv.Stop()
		return err
	}
}
