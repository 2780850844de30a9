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
	"time"

	"github.com/google/uuid"
	"github.com/rbs-build/rbs/jobs/config"
	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/service"
	"github.com/rbs-build/rbs/jobs/store"
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
	// Config is a cluster.rbs file defining queues; "" for the default
	// "batch" queue.
	Config string
	// WorkerTimeout is how long a silent or disconnected worker keeps its
	// work before it is given to others; 0 for the default.
	WorkerTimeout time.Duration
	// JobRetention is how long ended jobs are kept; 0 keeps them for ever.
	JobRetention time.Duration
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
	st, err := store.Open(cfg.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	schedCfg := sched.Config{Queues: sched.DefaultQueues, LostAfter: cfg.WorkerTimeout, Retention: cfg.JobRetention}
	if cfg.Config != "" {
		c, err := config.Load(cfg.Config)
		if err != nil {
			return err
		}
		schedCfg.Queues, schedCfg.AgeWeight, schedCfg.AgeInterval, schedCfg.AgeCap = c.Queues, c.AgeWeight, c.AgeInterval, c.AgeCap
	}
	jobs, err := service.New(service.Config{Store: st, Sched: schedCfg, Log: cfg.Log})
	if err != nil {
		return err
	}
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	jobsDone := make(chan error, 1)
	go func() { jobsDone <- jobs.Run(jobsCtx) }()
	defer func() {
		stopJobs()
		<-jobsDone
	}()
	execQueue := scheduler.New(scheduler.Config{NewID: func() string { return uuid.NewString() }, HeartbeatTimeout: cfg.WorkerTimeout})
	srv := server.New(server.Config{
		CAS:       blobstore.ContentAddressed(casDisk),
		AC:        ac,
		Token:     cfg.Token,
		TLS:       tlsCfg,
		Log:       cfg.Log,
		Scheduler: execQueue,
		Jobs:      jobs,
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
	case err := <-jobsDone:
		jobsDone <- err
		srv.Stop()
		<-done
		return fmt.Errorf("batch scheduler stopped: %w", err)
	}
}
