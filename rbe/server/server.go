// Package server provides Server, the gRPC front of an rbs cluster: the
// Remote Execution API's Capabilities, ContentAddressableStorage, ByteStream,
// ActionCache and Execution services, the rbs worker protocol and cluster
// status, plus gRPC health, all on one listener and all behind the same
// bearer-token check, with Prometheus metrics of them.
//
// The same listener serves HTTP (the web endpoint) beside gRPC. Without TLS,
// a web.Splitter gives the connections that open with the HTTP/2 preface to
// the native grpc.Server and the rest to a net/http server. With TLS, one
// net/http server terminates TLS (ALPN h2 and http/1.1) and sends the
// requests whose content type is application/grpc to grpc.Server.ServeHTTP,
// the rest to the web endpoint: browsers speak HTTP/2 over TLS too, so only
// each request tells which it is. See rbe/web.
//
// The server takes a net.Listener, so tests run it on 127.0.0.1:0.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/codec"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/session"
	"github.com/rbs-build/rbs/rbe/via"
	"github.com/rbs-build/rbs/rbe/web"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

const (
	// MaxBatchSize is the total size of blobs one batch call may carry, as
	// advertised in Capabilities.
	MaxBatchSize = 4 << 20
	// maxMessageSize leaves room above MaxBatchSize for message overhead.
	maxMessageSize = 16 << 20
	// chunkSize is the size of ByteStream read chunks.
	chunkSize = 1 << 20
	// windowSize is the HTTP/2 flow-control window per stream and connection.
	windowSize = 16 << 20
	// socketBufferSize is how much a connection reads or writes a system
	// call at a time.
	socketBufferSize = 1 << 20
	// streamWorkers is how many goroutines wait for calls: room for the
	// streams workers and builds keep open, and for a build's calls at
	// once.
	streamWorkers = 64
	// DefaultHeartbeatInterval is how often workers send heartbeats and the
	// scheduler checks for lost workers and overdue actions.
	DefaultHeartbeatInterval = 2 * time.Second
	// firstBytesWait bounds how long a connection may take to send its
	// first bytes (or, under TLS, its handshake and an HTTP/1 request's
	// header) before it is closed.
	firstBytesWait = 10 * time.Second
)

// Config is what a Server is built from.
type Config struct {
	// CAS holds content; it should be wrapped by blobstore.ContentAddressed.
	CAS blobstore.Store
	// AC maps action digests to serialized ActionResults.
	AC blobstore.Store
	// Token, when set, is the user token: the bearer token every call
	// needs but the worker stream's.
	Token string
	// Users are named user tokens, by name, good wherever Token is; calls
	// bearing one carry its name (auth.UserName).
	Users map[string]string
	// WorkerToken is the token workers present: the only one the worker
	// stream accepts, also good for the CAS. With Token set and this
	// empty, no one can connect as a worker.
	WorkerToken string
	// TLS, when set, serves TLS instead of plaintext.
	TLS *tls.Config
	// HTTP serves the HTTP requests that reach the port: plaintext HTTP/1.x
	// connections, and under TLS every request that is not gRPC. Nil
	// answers them 404.
	HTTP http.Handler
	// Log receives the server's log; nil discards it.
	Log *slog.Logger
	// Scheduler, when set, enables remote execution: the Execution
	// service, the worker protocol and cluster status.
	Scheduler *scheduler.Scheduler
	// HeartbeatInterval is how often workers are asked to send heartbeats.
	HeartbeatInterval time.Duration
	// Jobs, when set with Scheduler, is the batch scheduler sharing the
	// workers' streams and job slots.
	Jobs Jobs
}

// Jobs is the batch scheduler as the server sees it: it serves its own API,
// hears of worker sessions coming and going, of what their workers report
// holding and of their job messages, and reports its share of the cluster
// status. It sends to a worker through its session.
type Jobs interface {
	Register(grpc.ServiceRegistrar)
	// WorkerUp takes a new session and returns how much output of each job
	// attempt its worker runs is stored. The session's Drop ends the
	// worker's stream, so that it reconnects and registers anew.
	WorkerUp(sess *session.Session) map[string]int64
	// WorkerDown is told a session's stream has ended.
	WorkerDown(sess *session.Session)
	// Reconcile takes a worker's report of what it holds.
	Reconcile(sess *session.Session, r session.Report)
	FromWorker(sess *session.Session, m *workerpb.WorkerMessage)
	// Status returns job counts by state and job slots in use by worker.
	Status() (map[string]int64, map[string]int32)
}

// Server serves the rbs gRPC services.
type Server struct {
	cfg     Config
	log     *slog.Logger
	grpc    *grpc.Server
	health  *health.Server
	uploads *uploads
	metrics *metrics
	http    *http.Server

	stopped chan struct{} // closed when Stop begins

	ctx    context.Context // lives until Stop; owns background uploads
	cancel context.CancelFunc
	once   sync.Once
}

// KeepalivePolicy lets clients ping as often as rbs's own do.
var KeepalivePolicy = keepalive.EnforcementPolicy{MinTime: 5 * time.Second}

// New builds a Server from cfg.
func New(cfg Config) *Server {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, log: log, health: health.NewServer(), ctx: ctx, cancel: cancel, stopped: make(chan struct{})}
	s.uploads = newUploads(ctx, cfg.CAS)
	s.metrics = newMetrics(cfg.Scheduler)

	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMessageSize),
		grpc.MaxSendMsgSize(maxMessageSize),
		// Plain protobuf, with FindMissingBlobs decoded by hand.
		grpc.ForceServerCodecV2(codec.Codec{}),
		// Large flow-control windows keep big transfers from stalling on
		// window updates.
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.WriteBufferSize(socketBufferSize),
		grpc.ReadBufferSize(socketBufferSize),
		// Clients with a stream open ping a silent server (see
		// rbe/client) to find it gone: a stopped process, a machine
		// cut off.
		grpc.KeepaliveEnforcementPolicy(KeepalivePolicy),
		// Calls run on goroutines kept from call to call, whose stacks
		// have grown already: a new goroutine per call grew its stack
		// anew each time, copying it (5% of the server's CPU in a build
		// of cache hits). Long-lived streams hold one each; calls that
		// find none free get a goroutine of their own.
		grpc.NumStreamWorkers(streamWorkers),
	}
	// Counting comes first so that it sees what the others answer;
	// recovery next so that it covers the interceptors after it.
	opts = append(opts, s.metrics.interceptors()...)
	opts = append(opts, recovery(log)...)
	// A call that comes back here through a grpc:// backend is refused.
	opts = append(opts, via.ServerOptions(via.NewID())...)
	opts = append(opts, auth.NewChecker(auth.Tokens{User: cfg.Token, Users: cfg.Users, Worker: cfg.WorkerToken}, roles).ServerOptions()...)
	s.grpc = grpc.NewServer(opts...)
	s.http = s.newHTTP()
	repb.RegisterCapabilitiesServer(s.grpc, &capabilities{exec: cfg.Scheduler != nil})
	repb.RegisterContentAddressableStorageServer(s.grpc, &cas{store: cfg.CAS})
	repb.RegisterActionCacheServer(s.grpc, &actionCache{ac: cfg.AC, cas: cfg.CAS, metrics: s.metrics})
	bspb.RegisterByteStreamServer(s.grpc, &byteStream{cas: cfg.CAS, uploads: s.uploads})
	if cfg.Scheduler != nil {
		hb := cfg.HeartbeatInterval
		if hb <= 0 {
			hb = DefaultHeartbeatInterval
		}
		repb.RegisterExecutionServer(s.grpc, &execution{sched: cfg.Scheduler, cas: cfg.CAS, ac: cfg.AC, metrics: s.metrics})
		workerpb.RegisterWorkersServer(s.grpc, &workers{sched: cfg.Scheduler, jobs: cfg.Jobs, ac: cfg.AC, heartbeat: hb.Milliseconds(), log: log, metrics: s.metrics})
		workerpb.RegisterClusterServer(s.grpc, &cluster{sched: cfg.Scheduler, jobs: cfg.Jobs})
		if cfg.Jobs != nil {
			cfg.Jobs.Register(s.grpc)
		}
		go s.tick(hb)
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	return s
}

// newHTTP returns the net/http server of the port: of the web endpoint
// alone without TLS, and of gRPC too with it.
func (s *Server) newHTTP() *http.Server {
	h := s.cfg.HTTP
	if h == nil {
		h = http.NotFoundHandler()
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: firstBytesWait,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.cfg.TLS != nil {
		web := h
		srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				s.grpc.ServeHTTP(w, r)
				return
			}
			web.ServeHTTP(w, r)
		})
		srv.TLSConfig = s.cfg.TLS.Clone()
		srv.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
		// As large as the native server's, for big transfers.
		srv.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerConnection: windowSize, MaxReceiveBufferPerStream: windowSize}
	}
	return srv
}

// Collectors returns the server's Prometheus collectors: gRPC calls by
// method and code, action-cache lookups, the phases of executed actions,
// and the action queue's load.
func (s *Server) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// Status is the cluster's status as the Cluster service answers it; nil
// without remote execution.
func (s *Server) Status() *workerpb.StatusResponse {
	if s.cfg.Scheduler == nil {
		return nil
	}
	return clusterStatus(s.cfg.Scheduler, s.cfg.Jobs)
}

// byteStreamService is ByteStream's service name, which its generated
// package does not export.
const byteStreamService = "google.bytestream.ByteStream"

// roles says who may call a method. The worker stream hands out every
// user's commands and environments, so it is the workers' alone; the CAS,
// ByteStream, capabilities and health serve workers too, which fetch inputs
// and store outputs through them; everything else is the users'.
func roles(method string) auth.Role {
	service, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	switch service {
	case workerpb.Workers_ServiceDesc.ServiceName:
		return auth.Worker
	case repb.ContentAddressableStorage_ServiceDesc.ServiceName, byteStreamService,
		repb.Capabilities_ServiceDesc.ServiceName, healthpb.Health_ServiceDesc.ServiceName:
		return auth.User | auth.Worker
	}
	return auth.User
}

// tick drives the scheduler's time-based work until Stop.
func (s *Server) tick(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.cfg.Scheduler.Tick()
		case <-s.ctx.Done():
			return
		}
	}
}

// Methods returns the full names of every method the server registers, so
// that tests can check each one's guard.
func (s *Server) Methods() []string {
	var names []string
	for service, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			names = append(names, "/"+service+"/"+m.Name)
		}
	}
	return names
}

// Serve accepts connections on lis, gRPC and HTTP, until Stop or until
// one of its servers fails, when it stops the others. It returns nil after
// Stop.
func (s *Server) Serve(lis net.Listener) error {
	s.log.Info("serving", "addr", lis.Addr().String(), "tls", s.cfg.TLS != nil, "auth", s.cfg.Token != "" || len(s.cfg.Users) > 0)
	var err error
	if s.cfg.TLS != nil {
		err = s.http.ServeTLS(lis, "", "")
	} else {
		err = s.serveSplit(lis)
	}
	select {
	case <-s.stopped:
		return nil
	default:
		return err
	}
}

// serveSplit serves gRPC and HTTP/1.x on the plaintext lis.
func (s *Server) serveSplit(lis net.Listener) error {
	split := web.NewSplitter(lis, firstBytesWait)
	errs := make(chan error, 3)
	go func() { errs <- split.Serve() }()
	go func() { errs <- s.grpc.Serve(split.GRPC()) }()
	go func() {
		err := s.http.Serve(split.HTTP())
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errs <- err
	}()
	err := <-errs
	// Closing the splitter ends the servers' Accept, and so their Serve.
	split.Close()
	for range 2 {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

// Stop ends all calls, connections and background work.
func (s *Server) Stop() {
	s.once.Do(func() {
		close(s.stopped)
		s.health.Shutdown()
		s.grpc.Stop()
		s.http.Close()
		s.cancel()
		s.uploads.wait()
	})
}
