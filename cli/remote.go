package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rbs-build/rbs/cli/cluster"
	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/gpu"
	"github.com/rbs-build/rbs/rbe/heapfloor"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rbe/web"
	"github.com/rbs-build/rbs/rbe/worker"
)

// RemoteCmd is `rbs remote`.
type RemoteCmd struct {
	Serve  RemoteServeCmd  `cmd:"" help:"Run the scheduler, CAS and action cache on one port, gRPC and HTTP (/metrics, the dashboard)."`
	Worker RemoteWorkerCmd `cmd:"" help:"Join this machine to a cluster as a worker."`
	Status RemoteStatusCmd `cmd:"" help:"Show workers, queue depth and jobs."`
}

// serverHeapFloor is the heap a server or worker grows to before Go's
// collector runs: a call's garbage (2.5 MiB for FindMissingBlobs of 10,000
// digests) then costs a collection every few dozen calls rather than every
// other one. GOGC in the environment overrides it.
const serverHeapFloor = 64 << 20

// RemoteServeCmd is `rbs remote serve`.
type RemoteServeCmd struct {
	Listen             string        `help:"Address to listen on (port 0 picks a free one; default: :8980 with a token and no --workers, else 127.0.0.1:8980). Without a token only a loopback address is served." placeholder:"ADDR"`
	DataDir            string        `help:"Directory for the CAS, action cache and state (default: $XDG_DATA_HOME/rbs)." type:"path" placeholder:"DIR"`
	State              string        `help:"Where the batch scheduler's state is kept: postgres://USER@HOST:PORT/DB, a PostgreSQL database that several servers may share (password from --state-password-file, PGPASSFILE or ~/.pgpass, never the URL); default: SQLite in DATA_DIR/jobs.db." placeholder:"URL"`
	StatePassword      string        `name:"state-password-file" help:"File holding the password of the --state database." type:"existingfile" placeholder:"FILE"`
	Advertise          string        `help:"Address the other servers of a shared --state, and the clients they forward to, reach this one at (default: the --listen address, with this host's name for an unspecified host)." placeholder:"HOST:PORT"`
	CAS                string        `name:"cas" placeholder:"SPEC" help:"The CAS's backends: disk:DIR[?max_size=SIZE], grpc://HOST:PORT[/INSTANCE][?token_file=FILE&ca=FILE] (grpcs:// for TLS; the token comes from token_file, else $RBS_CAS_TOKEN), s3://BUCKET[/PREFIX]?endpoint=URL&region=R (credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials), shard([N*]A,B,...), mirror(A,B) or cache(disk:DIR,REMOTE), nested (default: disk:DATA_DIR/cas)."`
	AC                 string        `name:"ac" placeholder:"SPEC" help:"The action cache's backends, as --cas; a grpc backend is the remote's action cache (default: disk:DATA_DIR/ac)."`
	CASMaxSize         units.Size    `name:"cas-max-size" help:"Bound on the size of each disk store of the CAS that names no max_size; least recently used blobs are evicted beyond it." default:"50GiB"`
	ACMaxSize          units.Size    `name:"ac-max-size" help:"Bound on the size of each disk store of the action cache that names no max_size." default:"1GiB"`
	TokenFile          string        `name:"token-file" help:"File holding the user token every call must bear (default: $RBS_REMOTE_TOKEN; none: serve loopback only)." type:"existingfile" placeholder:"FILE"`
	UsersFile          string        `name:"users-file" help:"File of named user tokens, one 'NAME TOKEN' a line: each is good wherever the user token is, and jobs submitted with one are recorded as that user's." type:"existingfile" placeholder:"FILE"`
	WorkerTokenFile    string        `name:"worker-token-file" help:"File holding the token workers bear, the only one the worker stream takes (default: $RBS_WORKER_TOKEN, else one made in DATA_DIR/worker-token)." type:"existingfile" placeholder:"FILE"`
	InsecureNoAuth     bool          `name:"insecure-no-auth" help:"Serve a non-loopback address without a token: anyone who reaches the port can run commands on every worker."`
	TLSCert            string        `name:"tls-cert" help:"PEM certificate to serve TLS with." type:"existingfile" placeholder:"FILE"`
	TLSKey             string        `name:"tls-key" help:"PEM private key of --tls-cert." type:"existingfile" placeholder:"FILE"`
	Config             string        `help:"cluster.rbs file declaring the job queues (default: one queue, batch)." type:"existingfile" placeholder:"FILE"`
	WorkerTimeout      spec.Duration `help:"How long a silent or disconnected worker keeps its actions and jobs before they go elsewhere: 15s, 2m, or Slurm's MM:SS, a bare number being minutes." default:"15s" placeholder:"DURATION"`
	JobRetention       spec.Duration `help:"How long ended jobs, their output included, are kept: 30d, 12h, or Slurm's D-HH:MM:SS, a bare number being minutes (default: for ever)." placeholder:"DURATION"`
	OperationRetention spec.Duration `name:"operation-retention" help:"How long a finished build action's operation stays for clients that wait on it again (WaitExecution): 10m, 30s, or Slurm's MM:SS, a bare number being minutes." default:"10m" placeholder:"DURATION"`
	PreemptGrace       spec.Duration `name:"preempt-grace" help:"How long a preempted job has between SIGTERM and SIGKILL to write its checkpoint: 30s, 2m, 1d, a bare number being minutes." default:"30s" placeholder:"DURATION"`
	PreemptExempt      spec.Duration `name:"preempt-exempt" help:"How long a job runs, from each start, before it may be preempted (Slurm's PreemptExemptTime), so that a requeued job is not stopped over and over while room comes and goes: 5m, 1h, a bare number being minutes (default: from its start)." placeholder:"DURATION"`
	MaxJobOutput       units.Size    `name:"max-job-output" help:"Most output kept of each job attempt: its first and last halves, with a line between them saying how much was dropped (0: no cap)." default:"1GiB"`
	Workers            int           `help:"Run N workers in this process beside the server, named w1…wN with work dirs DATA_DIR/workers/wI, each offering an Nth of this machine's CPUs (at least one), memory and GPUs, and as many action and job slots as CPUs." placeholder:"N"`
	MetricsPublic      bool          `name:"metrics-public" help:"Serve /metrics without the token, for a Prometheus that holds none; the rest of the web endpoint still asks for it."`
	LogFormat          string        `name:"log-format" help:"Log format on stderr: text or json (default: text)." default:"text" placeholder:"text|json"`
}

// Run implements the command.
func (c *RemoteServeCmd) Run() error {
	heapfloor.Set(serverHeapFloor)
	log, err := newLogger(c.LogFormat)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	token, err := secret(c.TokenFile, tokenEnv)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	workerToken, err := secret(c.WorkerTokenFile, workerTokenEnv)
	if err != nil {
		return fmt.Errorf("--worker-token-file: %w", err)
	}
	var users map[string]string
	if c.UsersFile != "" {
		if users, err = auth.ReadUsersFile(c.UsersFile); err != nil {
			return fmt.Errorf("--users-file: %w", err)
		}
	}
	var casSpec, acSpec blobstore.Spec
	if c.CAS != "" {
		if casSpec, err = blobstore.Parse(c.CAS); err != nil {
			return fmt.Errorf("--cas %w", err)
		}
	}
	if c.AC != "" {
		if acSpec, err = blobstore.Parse(c.AC); err != nil {
			return fmt.Errorf("--ac %w", err)
		}
	}
	if c.Workers < 0 {
		return fmt.Errorf("--workers %d: want a number of workers, 0 or more", c.Workers)
	}
	var state *url.URL
	if c.State != "" {
		if state, err = store.ParsePostgresURL(c.State); err != nil {
			return fmt.Errorf("--state: %w", err)
		}
	} else if c.StatePassword != "" {
		return fmt.Errorf("--state-password-file is the password of a --state database; give --state too")
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("--advertise %q: want HOST:PORT", c.Advertise)
		}
	}
	dataDir := c.DataDir
	if dataDir == "" {
		dataDir = cluster.DefaultDataDir()
	}
	var workers []worker.Config
	if c.Workers > 0 {
		found, reason := gpu.Discover()
		if len(found) == 0 {
			log.Info("no GPUs offered", "reason", reason)
		}
		for _, e := range embeddedWorkers(c.Workers, dataDir, runtime.NumCPU(), worker.MemoryBytes(), found) {
			e.cmd.LogFormat = c.LogFormat
			cfg, err := e.cmd.configOffering(e.gpus)
			if len(found) == 0 {
				cfg.GPUNote = reason
			}
			if err != nil {
				return err
			}
			workers = append(workers, cfg)
		}
	}
	return cluster.Serve(ctx, cluster.Config{
		Listen:             c.Listen,
		DataDir:            dataDir,
		State:              state,
		Advertise:          c.Advertise,
		StatePassword:      c.StatePassword,
		CAS:                casSpec,
		AC:                 acSpec,
		CASMaxSize:         int64(c.CASMaxSize),
		ACMaxSize:          int64(c.ACMaxSize),
		StoreToken:         os.Getenv(storeTokenEnv),
		Token:              token,
		Users:              users,
		WorkerToken:        workerToken,
		InsecureNoAuth:     c.InsecureNoAuth,
		TLSCert:            c.TLSCert,
		TLSKey:             c.TLSKey,
		Config:             c.Config,
		WorkerTimeout:      time.Duration(c.WorkerTimeout),
		JobRetention:       time.Duration(c.JobRetention),
		OperationRetention: time.Duration(c.OperationRetention),
		MaxJobOutput:       int64(c.MaxJobOutput),
		PreemptGrace:       time.Duration(c.PreemptGrace),
		PreemptExempt:      time.Duration(c.PreemptExempt),
		Workers:            workers,
		MetricsPublic:      c.MetricsPublic,
		Log:                log,
		Ready: func(addr net.Addr) {
			fmt.Fprintf(os.Stderr, "rbs remote serve: listening on %s (dashboard: %s)\n", addr, dashboardURL(addr, c.TLSCert != ""))
		},
	})
}

// dashboardURL is where a browser finds the dashboard of a server
// listening on addr: the machine's name when it listens on every address.
func dashboardURL(addr net.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			host = "localhost"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// storeTokenEnv names the variable holding the bearer token `rbs remote
// serve` sends to the grpc backends of --cas and --ac that name no
// token_file.
const storeTokenEnv = "RBS_CAS_TOKEN"

// embeddedWorker is one of the workers `rbs remote serve --workers N` runs:
// the `rbs remote worker` command it would be, and the GPUs it offers.
type embeddedWorker struct {
	cmd  RemoteWorkerCmd
	gpus []*workerpb.Gpu
}

// embeddedWorkers splits a machine of cpus CPUs, memory bytes and gpus among
// n workers named w1…wN, with work dirs under dataDir/workers: each offers an
// nth of the CPUs (at least one), of the memory, of the GPUs and of the
// default cache bound, and as many action and job slots as CPUs.
func embeddedWorkers(n int, dataDir string, cpus int, memory int64, gpus []*workerpb.Gpu) []embeddedWorker {
	out := make([]embeddedWorker, n)
	nextGPU := 0
	for i := range out {
		name := fmt.Sprintf("w%d", i+1)
		ngpus := share(len(gpus), n, i)
		out[i] = embeddedWorker{
			cmd: RemoteWorkerCmd{
				Name:             name,
				WorkDir:          filepath.Join(dataDir, "workers", name),
				CPUs:             max(1, share(cpus, n, i)),
				MemoryGB:         units.GiB(memory / int64(n)),
				ActionSlots:      -1,
				JobSlots:         -1,
				GPUs:             "auto",
				CacheMaxSize:     defaultWorkerCache / units.Size(n),
				ContainerRuntime: "auto",
				LogFormat:        "text",
			},
			gpus: gpus[nextGPU : nextGPU+ngpus],
		}
		nextGPU += ngpus
	}
	return out
}

// share is the ith of n shares of total, the first total%n one greater.
func share(total, n, i int) int {
	s := total / n
	if i < total%n {
		s++
	}
	return s
}

// defaultWorkerCache is the default of `rbs remote worker --cache-max-size`.
const defaultWorkerCache = 10 << 30

// workerTokenEnv names the variable holding the worker token.
const workerTokenEnv = "RBS_WORKER_TOKEN"

// RemoteWorkerCmd is `rbs remote worker`.
type RemoteWorkerCmd struct {
	Server           string       `help:"Server address: HOST:PORT, grpc://HOST:PORT or grpcs://HOST:PORT, or a comma-separated list of a cluster's servers." env:"RBS_REMOTE" placeholder:"ADDR"`
	WorkerTokenFile  string       `name:"worker-token-file" help:"File holding the server's worker token (default: $RBS_WORKER_TOKEN)." type:"existingfile" placeholder:"FILE"`
	TLSCA            string       `name:"tls-ca" help:"PEM file of the CA that signed the server's certificate (grpcs:// servers)." type:"existingfile" placeholder:"FILE"`
	WorkDir          string       `help:"Directory for the worker's cache and scratch space (default: $XDG_CACHE_HOME/rbs/worker-NAME)." type:"path" placeholder:"DIR"`
	Name             string       `help:"Worker name, unique in the cluster (default: the host name)." placeholder:"NAME"`
	ActionSlots      int          `help:"Build actions run at once (default: one per CPU)." default:"-1" placeholder:"N"`
	JobSlots         int          `help:"Batch jobs run at once (default: one per CPU)." default:"-1" placeholder:"N"`
	CPUs             int          `name:"cpus" help:"CPUs offered (default: all)." placeholder:"N"`
	MemoryGB         units.GiB    `name:"memory-gb" help:"Memory offered: a size such as 64G or 512GiB, a bare number being GiB (default: all)." placeholder:"SIZE"`
	GPUs             string       `name:"gpus" help:"GPUs offered: a number, or auto to discover them with NVML (default: auto)." default:"auto" placeholder:"N|auto"`
	Platform         platformFlag `help:"Platform offered, as OS-ARCH such as linux-x86_64 or linux-arm64, which sets the OSFamily and ISA properties (default: this machine's). Name another only for a machine that runs that platform's programs, under emulation for instance." placeholder:"OS-ARCH"`
	Property         []string     `sep:"none" help:"Platform property NAME=VALUE offered besides OSFamily and ISA (repeatable)." placeholder:"NAME=VALUE"`
	Topology         string       `help:"Where the worker sits, as topology labels NAME=VALUE[,NAME=VALUE...], such as rack=r7,block=b2: properties that gangs submitted with --pack are packed by." placeholder:"LABELS"`
	CacheMaxSize     units.Size   `name:"cache-max-size" help:"Bound on the local CAS cache." default:"${worker_cache}"`
	RunAs            string       `name:"run-as" placeholder:"USER" help:"Run build actions and batch jobs as USER (a name or numeric uid; with USER's groups and HOME), so that they cannot read the worker's token, environment or cache; only a worker started as root can name another user than its own. Without it they run as the worker's user and can read all three."`
	ContainerRuntime string       `name:"container-runtime" help:"What runs the jobs that name an image (--container): auto finds podman, else docker, on PATH and offers none when neither works; podman, docker or the path of either must work; none offers none (default: auto)." default:"auto" placeholder:"auto|podman|docker|none|PATH"`
	ContainerFlag    []string     `name:"container-flag" sep:"none" placeholder:"FLAG" help:"Flag for every container run, after those the worker works out for this machine (podman: --runtime runc where crun is the default, --ulimit nofile and nproc at the worker's own limits, --pids-limit -1), which it may override; e.g. --container-flag=--security-opt=label=disable (repeatable)."`
	LogFormat        string       `name:"log-format" help:"Log format on stderr: text or json (default: text)." default:"text" placeholder:"text|json"`
	MetricsListen    string       `name:"metrics-listen" help:"Serve the worker's Prometheus metrics, the Go runtime's and the process's (goroutines, open files, memory), at http://ADDR/metrics (and its profiles at /debug/pprof/), for an agent on the same machine: a loopback address only; port 0 picks a free one." placeholder:"ADDR"`
}

// newLogger returns a logger writing to stderr in format: text or json.
func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// Run implements the command.
func (c *RemoteWorkerCmd) Run() error {
	heapfloor.Set(serverHeapFloor)
	cfg, err := c.config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.MetricsListen != "" {
		addr, err := serveProcessMetrics(ctx, c.MetricsListen)
		if err != nil {
			return err
		}
		cfg.Log.Info("serving metrics", "url", "http://"+addr+"/metrics")
	}
	return worker.Run(ctx, cfg)
}

// serveProcessMetrics serves the Go runtime's and the process's metrics at
// /metrics, and its profiles under /debug/pprof/, on listen, a loopback
// address, until ctx is done, and returns the address it listens on.
func serveProcessMetrics(ctx context.Context, listen string) (string, error) {
	if !cluster.Loopback(listen) {
		return "", fmt.Errorf("--metrics-listen %q: a worker serves its metrics on a loopback address only", listen)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", fmt.Errorf("--metrics-listen: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	web.HandleProfiles(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	return ln.Addr().String(), nil
}

// config is the worker the flags describe, offering the GPUs --gpus selects
// of those found.
func (c *RemoteWorkerCmd) config() (worker.Config, error) {
	found, reason := gpu.Discover()
	gpus, err := worker.SelectGPUs(c.GPUs, found)
	if err != nil {
		return worker.Config{}, err
	}
	cfg, err := c.configOffering(gpus)
	if err == nil && len(found) == 0 && c.GPUs == "auto" {
		cfg.Log.Info("no GPUs offered", "reason", reason)
		cfg.GPUNote = reason
	}
	return cfg, err
}

// configOffering is the worker the flags other than --gpus describe,
// offering gpus.
func (c *RemoteWorkerCmd) configOffering(gpus []*workerpb.Gpu) (worker.Config, error) {
	log, err := newLogger(c.LogFormat)
	if err != nil {
		return worker.Config{}, err
	}
	cfg := worker.Config{
		Server:       client.Options{Target: c.Server, Token: os.Getenv(workerTokenEnv), TokenFile: c.WorkerTokenFile, CACert: c.TLSCA},
		Name:         c.Name,
		CPUs:         c.CPUs,
		MemoryBytes:  int64(c.MemoryGB),
		CacheMaxSize: int64(c.CacheMaxSize),
		Version:      Version(),
		Log:          log,
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return cfg, fmt.Errorf("no --name given and the host name is unknown: %w", err)
		}
		cfg.Name = host
	}
	if c.RunAs != "" {
		u, err := runAsUser(c.RunAs, os.Geteuid())
		if err != nil {
			return cfg, err
		}
		cfg.RunAs = u
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = runtime.NumCPU()
	}
	if cfg.CPUs < 0 {
		return cfg, fmt.Errorf("--cpus %d: must not be negative", cfg.CPUs)
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = worker.MemoryBytes()
	}
	cfg.ActionSlots, cfg.JobSlots = c.ActionSlots, c.JobSlots
	if cfg.ActionSlots < 0 {
		cfg.ActionSlots = cfg.CPUs
	}
	if cfg.JobSlots < 0 {
		cfg.JobSlots = cfg.CPUs
	}
	cfg.GPUs = gpus
	if c.Platform != "" {
		p, err := platform.Parse(string(c.Platform))
		if err != nil {
			return cfg, fmt.Errorf("--platform: %w", err)
		}
		cfg.Platform = p
	}
	for _, p := range c.Property {
		prop, err := worker.ParseProperty(p)
		if err != nil {
			return cfg, err
		}
		cfg.Properties = append(cfg.Properties, prop)
	}
	if c.Topology != "" {
		for _, p := range strings.Split(c.Topology, ",") {
			prop, err := worker.ParseProperty(p)
			if err != nil {
				return cfg, fmt.Errorf("--topology %q: %w", c.Topology, err)
			}
			cfg.Properties = append(cfg.Properties, prop)
		}
	}
	cfg.ContainerRuntime, cfg.ContainerFlags = c.ContainerRuntime, c.ContainerFlag
	cfg.WorkDir = c.WorkDir
	if cfg.WorkDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return cfg, fmt.Errorf("no --work-dir given: %w", err)
		}
		cfg.WorkDir = filepath.Join(dir, "rbs", "worker-"+cfg.Name)
	}
	return cfg, nil
}

// RemoteStatusCmd is `rbs remote status`.
type RemoteStatusCmd struct {
	RemoteFlags
	JSON bool `name:"json" help:"Print JSON: an object with workers, queue, jobs and actions."`
}

// Run implements the command.
func (c *RemoteStatusCmd) Run() error {
	conn, err := client.Dial(c.options())
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := workerpb.NewClusterClient(conn).Status(ctx, &workerpb.StatusRequest{})
	if err != nil {
		return fmt.Errorf("asking %s for its status: %w", c.Server, err)
	}
	if c.JSON {
		return schema.Write(os.Stdout, schema.FromStatus(st))
	}
	printStatus(os.Stdout, st)
	return nil
}
