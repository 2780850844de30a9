// Package cluster is the composition root above rbe/ and jobs/: it composes
// an rbs server from its parts (the CAS and action cache, disk stores under
// a data directory unless other chains of backends are given, TLS material, the execution scheduler, the batch scheduler,
// the gRPC services, and the web endpoint on the same port with the
// Prometheus registry it serves at /metrics) and runs in-process workers
// beside it. It is the one place where `rbs remote serve` is wired together.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rbs-build/rbs/cli/cluster/dashboard"
	"github.com/rbs-build/rbs/jobs/config"
	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/service"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/forward"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/server"
	"github.com/rbs-build/rbs/rbe/web"
	"github.com/rbs-build/rbs/rbe/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Config is what `rbs remote serve` is given.
type Config struct {
	Listen  string // host:port; port 0 picks a free port
	DataDir string
	// State is the PostgreSQL database the batch scheduler's state is kept
	// in; nil keeps it in SQLite under DataDir. StatePassword is a file
	// holding its password ("": as libpq finds it).
	State         *url.URL
	StatePassword string
	// CAS and AC are the chains of backends of the CAS and the action
	// cache (blobstore.Spec); nil for a disk store under DataDir, cas/ and
	// ac/.
	CAS, AC blobstore.Spec
	// CASMaxSize and ACMaxSize bound, in bytes, each disk backend of the
	// CAS and of the action cache that names no max_size, the default
	// ones included; 0 for no bound.
	CASMaxSize int64
	ACMaxSize  int64
	// StoreToken is the bearer token sent to the grpc backends of CAS and
	// AC whose spec names no token_file.
	StoreToken string
	// Token is the user token; "" serves without authentication, which
	// is allowed on loopback only unless InsecureNoAuth.
	Token string
	// Users are named user tokens, by name: good wherever Token is, and
	// the jobs submitted with one are recorded as its user's.
	Users map[string]string
	// WorkerToken is the token workers present. With a Token and no
	// WorkerToken, one is made and kept in DataDir/worker-token.
	WorkerToken string
	// InsecureNoAuth allows serving a non-loopback address without a
	// token.
	InsecureNoAuth bool
	TLSCert        string
	TLSKey         string
	Log            *slog.Logger
	// Ready, when set, is called with the address the server listens on
	// once it accepts connections.
	Ready func(addr net.Addr)
	// Advertise is the address other servers of a shared state and their
	// clients reach this one at; "" for the address it listens on.
	Advertise string
	// Config is a cluster.rbs file defining queues; "" for the default
	// "batch" queue.
	Config string
	// WorkerTimeout is how long a silent or disconnected worker keeps its
	// work before it is given to others; 0 for the default.
	WorkerTimeout time.Duration
	// JobRetention is how long ended jobs are kept; 0 keeps them for ever.
	JobRetention time.Duration
	// OperationRetention is how long a finished action's operation is
	// kept for WaitExecution; 0 for the default.
	OperationRetention time.Duration
	// MaxJobOutput caps the output stored of each job attempt, in bytes:
	// its head and its tail are kept; 0 for no cap.
	MaxJobOutput int64
	// PreemptGrace is how long a preempted job has between SIGTERM and
	// SIGKILL; 0 for the default.
	PreemptGrace time.Duration
	// PreemptExempt is how long a job runs, from each start, before it may
	// be preempted; 0 from its start.
	PreemptExempt time.Duration
	// Workers run in this process beside the server once it listens, each
	// dialing it with the worker token; their Server is filled in. With
	// workers and no Listen, only loopback is served, token or not.
	Workers []worker.Config
	// MetricsPublic serves /metrics without the token.
	MetricsPublic bool
	// Collectors are served at /metrics beside the server's own.
	Collectors []prometheus.Collector
}

// userTokens reports whether any user token is set.
func (cfg Config) userTokens() bool { return cfg.Token != "" || len(cfg.Users) > 0 }

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
	c, err := Open(cfg)
	if err != nil {
		return err
	}
	return c.Serve(ctx)
}

// Cluster is a composed server holding its data directory and listener,
// ready to serve.
type Cluster struct {
	cfg      Config
	lock     *os.File // flock held on the data directory for the server's life
	lis      net.Listener
	store    *store.Store
	jobs     *service.Service
	srv      *server.Server
	tlsCfg   *tls.Config
	jobsDone chan error
	stopJobs context.CancelFunc
	// casStore and acStore are the blob stores the services are composed
	// on.
	casStore, acStore blobstore.Store
	// lease is this server's hold on a shared state, nil when the state
	// is its own.
	lease *store.Lease
	// stopStores closes the connections of the stores' remote backends.
	stopStores context.CancelFunc
}

// Open composes a server from cfg: it takes the data directory's lock,
// opens the stores, listens, and starts the batch scheduler. Serve runs it.
func Open(cfg Config) (_ *Cluster, err error) {
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir()
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key must be given together")
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("loading TLS certificate: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen(cfg.userTokens() && len(cfg.Workers) == 0)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	c := &Cluster{cfg: cfg}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if c.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if cfg.userTokens() && cfg.WorkerToken == "" {
		if c.cfg.WorkerToken, err = workerToken(cfg.DataDir, cfg.Log); err != nil {
			return nil, err
		}
	}
	if c.casStore, c.acStore, err = c.openStores(); err != nil {
		return nil, err
	}
	if !cfg.userTokens() && !Loopback(cfg.Listen) {
		if !cfg.InsecureNoAuth {
			return nil, fmt.Errorf("refusing to serve %s without a token: anyone who reaches that port could run commands on every worker. "+
				"Give a token with --token-file FILE or RBS_REMOTE_TOKEN, listen on 127.0.0.1, or pass --insecure-no-auth to serve it open anyway", cfg.Listen)
		}
		if cfg.Log != nil {
			cfg.Log.Warn("serving without authentication (--insecure-no-auth): anyone who reaches the port can run commands on every worker", "addr", cfg.Listen)
		}
	}
	if c.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	if c.store, err = openState(cfg); err != nil {
		return nil, err
	}
	c.tlsCfg = tlsCfg
	if cfg.State == nil {
		// The state is this server's alone: it is the active one.
		if err := c.compose(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// compose builds the services on the opened state: the batch scheduler
// (loading its jobs), the execution queue, the gRPC and web endpoint and
// the metrics, and starts the batch scheduler.
func (c *Cluster) compose() error {
	cfg := c.cfg
	var err error
	schedCfg := sched.Config{Queues: sched.DefaultQueues, LostAfter: cfg.WorkerTimeout, Retention: cfg.JobRetention, MaxJobOutput: cfg.MaxJobOutput, PreemptGrace: cfg.PreemptGrace,
		PreemptExempt: cfg.PreemptExempt}
	if cfg.Config != "" {
		qc, err := config.Load(cfg.Config)
		if err != nil {
			return err
		}
		schedCfg.Queues, schedCfg.AgeWeight, schedCfg.AgeInterval, schedCfg.AgeCap = qc.Queues, qc.AgeWeight, qc.AgeInterval, qc.AgeCap
		schedCfg.FairShare, schedCfg.Lookback = qc.FairShare, qc.Lookback
	}
	// The action queue owns worker liveness: one deadline, after which a
	// worker gone or silent loses its actions and its jobs at once. The
	// jobs scheduler's maintenance windows keep actions off their workers.
	var execQueue *scheduler.Scheduler
	jobsCfg := service.Config{Store: c.store, Sched: schedCfg, Log: cfg.Log, Maintenance: func(all bool, workers []string) { execQueue.SetMaintenance(all, workers) },
		HasOutputs: func(ctx context.Context, root string) bool {
			d, err := digest.Parse(root)
			if err != nil {
				return false
			}
			ok, err := blobstore.Complete(ctx, c.casStore, d)
			if err != nil {
				if cfg.Log != nil {
					cfg.Log.Warn("checking a job cache entry's outputs; the job runs", "output_root", root, "err", err)
				}
			}
			return ok
		}}
	if c.jobs, err = service.New(jobsCfg); err != nil {
		return err
	}
	execQueue = scheduler.New(scheduler.Config{NewID: func() string { return uuid.NewString() }, HeartbeatTimeout: cfg.WorkerTimeout, Retention: cfg.OperationRetention, Lost: c.jobs.WorkerLost})
	jobsCtx, stopJobs := context.WithCancel(context.Background())
	c.stopJobs = stopJobs
	c.jobsDone = make(chan error, 1)
	go func() { c.jobsDone <- c.jobs.Run(jobsCtx) }()
	storeMetrics := blobstore.NewMetrics()
	cas := blobstore.ContentAddressed(storeMetrics.Instrument("cas", c.casStore))
	board := dashboard.New(dashboard.Config{Jobs: c.jobs, CAS: cas, Actions: execQueue.Recent,
		Status: func() *workerpb.StatusResponse { return c.srv.Status() }})
	metrics := prometheus.NewRegistry()
	c.srv = server.New(server.Config{
		CAS:         cas,
		AC:          storeMetrics.Instrument("ac", c.acStore),
		Token:       cfg.Token,
		Users:       cfg.Users,
		WorkerToken: c.cfg.WorkerToken,
		TLS:         c.tlsCfg,
		Log:         cfg.Log,
		Scheduler:   execQueue,
		Jobs:        c.jobs,
		HTTP: web.New(web.Config{Tokens: auth.Tokens{User: cfg.Token, Users: cfg.Users}.UserTokens(), Metrics: metrics, MetricsPublic: cfg.MetricsPublic,
			Dashboard: board.Page(), Routes: board.Routes()}),
	})
	all := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), storeMetrics}
	all = append(all, c.srv.Collectors()...)
	all = append(all, c.jobs.Collectors()...)
	all = append(all, cfg.Collectors...)
	for _, col := range all {
		if err := metrics.Register(col); err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
	}
	return nil
}

// openState opens the batch scheduler's state: the --state database, or
// SQLite in the data directory.
func openState(cfg Config) (*store.Store, error) {
	if cfg.State == nil {
		return store.Open(cfg.DataDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return store.OpenPostgres(ctx, cfg.State, cfg.StatePassword)
}

// A disk store keeps its blobs of up to residentBlob bytes in memory too,
// up to residentBytes of them: a cache hit then reads its action result and
// small outputs without opening a file.
const (
	residentBlob  = 16 << 10
	residentBytes = 64 << 20
)

// openStores builds the CAS and the action cache: the chains of backends
// given, else disk stores under the data directory (cas/, ac/), opened as
// they always were. No two disk backends may share a directory.
func (c *Cluster) openStores() (cas, ac blobstore.Store, err error) {
	cfg := c.cfg
	casSpec, acSpec := cfg.CAS, cfg.AC
	if casSpec == nil {
		casSpec = &blobstore.DiskSpec{Dir: filepath.Join(cfg.DataDir, "cas"), MaxSize: cfg.CASMaxSize}
	}
	if acSpec == nil {
		acSpec = &blobstore.DiskSpec{Dir: filepath.Join(cfg.DataDir, "ac"), MaxSize: cfg.ACMaxSize}
	}
	casDirs := map[string]bool{}
	for _, dir := range blobstore.DiskDirs(casSpec) {
		casDirs[dir] = true
	}
	for _, dir := range blobstore.DiskDirs(acSpec) {
		if casDirs[dir] {
			return nil, nil, fmt.Errorf("the CAS (%s) and the action cache (%s) both use the disk directory %s: give each its own", casSpec, acSpec, dir)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	c.stopStores = stop
	open := func(flag string, given blobstore.Spec, spec blobstore.Spec, o blobstore.Options) (blobstore.Store, error) {
		var s blobstore.Store
		var err error
		if given == nil {
			d := spec.(*blobstore.DiskSpec)
			s, err = blobstore.NewDisk(d.Dir, d.MaxSize, o.Kind.DiskOptions()...)
		} else {
			o.Token = cfg.StoreToken
			if s, err = blobstore.Open(ctx, spec, o); err != nil {
				err = fmt.Errorf("%s: %w", flag, err)
			}
		}
		if _, disk := spec.(*blobstore.DiskSpec); disk && err == nil {
			s = blobstore.NewResident(s, residentBlob, residentBytes)
		}
		return s, err
	}
	if cas, err = open("--cas", cfg.CAS, casSpec, blobstore.Options{Kind: blobstore.CASKind, DiskMaxSize: cfg.CASMaxSize}); err != nil {
		return nil, nil, err
	}
	if ac, err = open("--ac", cfg.AC, acSpec, blobstore.Options{Kind: blobstore.ACKind, DiskMaxSize: cfg.ACMaxSize}); err != nil {
		return nil, nil, err
	}
	return cas, ac, nil
}

// Addr is the address the cluster listens on.
func (c *Cluster) Addr() net.Addr { return c.lis.Addr() }

// Methods lists the full names of every gRPC method the cluster serves.
func (c *Cluster) Methods() []string { return c.srv.Methods() }

// Serve serves until ctx is done, the server fails or an in-process worker
// does, then stops the workers, the server, and releases everything Open
// took.
func (c *Cluster) Serve(ctx context.Context) error {
	defer c.close()
	lis := c.lis
	if c.cfg.Ready != nil {
		c.cfg.Ready(c.lis.Addr())
	}
	if c.srv == nil {
		// The state is shared: stand by until this server holds its
		// lease, then take over on the same port.
		h := newHandoff(c.lis)
		if err := c.standBy(ctx, h.listener()); err != nil || ctx.Err() != nil {
			return err
		}
		start := time.Now()
		if err := c.compose(); err != nil {
			return err
		}
		if c.cfg.Log != nil {
			c.cfg.Log.Info("active: loaded the shared state", "took", time.Since(start).Round(time.Millisecond).String())
		}
		lis = h.listener()
	}
	done := make(chan error, 1)
	go func() { done <- c.srv.Serve(lis) }()
	workersCtx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	workerErr := make(chan error, len(c.cfg.Workers))
	for _, wc := range c.cfg.Workers {
		wc.Server = c.workerOptions()
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := worker.Run(workersCtx, wc); err != nil {
				workerErr <- fmt.Errorf("worker %s: %w", wc.Name, err)
			}
		}()
	}
	stop := func() {
		stopWorkers()
		workers.Wait()
		c.srv.Stop()
	}
	select {
	case <-ctx.Done():
		stop()
		<-done
		return nil
	case err := <-done:
		stop()
		return err
	case err := <-workerErr:
		stop()
		<-done
		return err
	case err := <-c.jobsDone:
		c.jobsDone <- err
		stop()
		<-done
		if errors.Is(err, store.ErrFenced) {
			return fmt.Errorf("stepping down: %w", err)
		}
		return fmt.Errorf("batch scheduler stopped: %w", err)
	case <-c.leaseLost():
		stop()
		<-done
		return fmt.Errorf("stepping down: %w", c.lease.Err())
	}
}

// leaseLost is closed when this server's lease on a shared state is lost;
// nil (never ready) when the state is its own.
func (c *Cluster) leaseLost() <-chan struct{} {
	if c.lease == nil {
		return nil
	}
	return c.lease.Lost()
}

// standBy serves lis as a standby, forwarding every call to the active
// server, until this server takes the lease of the shared state (or ctx
// ends).
func (c *Cluster) standBy(ctx context.Context, lis net.Listener) error {
	log := c.cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	self := c.advertise()
	proxy := forward.New(c.dialPeer)
	defer proxy.Close()
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(peerMessageSize), grpc.MaxSendMsgSize(peerMessageSize), grpc.KeepaliveEnforcementPolicy(server.KeepalivePolicy)}
	if c.tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c.tlsCfg)))
	}
	srv := proxy.Server(opts...)
	go srv.Serve(lis)
	defer srv.Stop()
	log.Info("standing by for the shared state's lease", "addr", self)
	lease, err := c.store.Acquire(ctx, self, func(active string) {
		if active == self {
			return // this server's own lease, from before it restarted
		}
		log.Info("standing by: forwarding calls to the active server", "active", active)
		if err := proxy.SetTarget(active); err != nil {
			log.Warn("cannot forward to the active server", "active", active, "err", err)
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("waiting for the lease of the shared state: %w", err)
	}
	c.lease = lease
	log.Info("active: took the lease of the shared state", "epoch", lease.Epoch, "addr", self)
	return nil
}

// peerMessageSize bounds a message forwarded between servers: the largest
// a client or worker may send, with room for its framing.
const peerMessageSize = 16<<20 + 1<<16

// dialPeer connects to another server of the cluster, to forward calls to
// it; the calls carry their own tokens.
func (c *Cluster) dialPeer(target string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if c.tlsCfg != nil {
		pool := x509.NewCertPool()
		for _, cert := range c.tlsCfg.Certificates {
			for _, der := range cert.Certificate {
				if parsed, err := x509.ParseCertificate(der); err == nil {
					pool.AddCert(parsed)
				}
			}
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	return grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(peerMessageSize), grpc.MaxCallSendMsgSize(peerMessageSize)))
}

// advertise is the address other servers and clients reach this one at:
// --advertise, else the address it listens on (this host's name for an
// unspecified host).
func (c *Cluster) advertise() string {
	if c.cfg.Advertise != "" {
		return c.cfg.Advertise
	}
	tcp, ok := c.lis.Addr().(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return c.lis.Addr().String()
	}
	host, err := os.Hostname()
	if err != nil {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}

// workerOptions is how an in-process worker dials the server: at the
// address it listens on (loopback for an unspecified host), with the worker
// token, trusting the server's own certificate under TLS.
func (c *Cluster) workerOptions() client.Options {
	opts := client.Options{Target: dialAddr(c.lis.Addr()), Token: c.cfg.WorkerToken}
	if c.tlsCfg != nil {
		opts.Target = "grpcs://" + opts.Target
		opts.CACert = c.cfg.TLSCert
	}
	return opts
}

// dialAddr is the address to dial a listener at addr from this machine.
func dialAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

// close releases what Open took, in the reverse order.
func (c *Cluster) close() {
	if c.srv != nil {
		c.srv.Stop()
	}
	if c.stopJobs != nil {
		c.stopJobs()
		<-c.jobsDone
	}
	if c.lease != nil {
		// Nothing commits any more: a standby may take over at once,
		// not once the lease is stale.
		c.lease.Release()
	}
	if c.stopStores != nil {
		c.stopStores()
	}
	if c.store != nil {
		c.store.Close()
	}
	if c.lis != nil {
		c.lis.Close()
	}
	if c.lock != nil {
		c.lock.Close()
	}
}

// DefaultListen is the address a server listens on when given none: every
// interface with a token, loopback only without one.
func DefaultListen(haveToken bool) string {
	if haveToken {
		return ":8980"
	}
	return "127.0.0.1:8980"
}

// Loopback reports whether the listen address host:port is reachable from
// this machine only: a loopback IP, or a name all of whose addresses are.
// It is decided before listening, so that a refused server never opens the
// port.
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}
