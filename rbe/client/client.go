// Package client provides the REAPI client pieces rbs commands use against an
// rbs server or any REAPI server: Dial (address forms, TLS, bearer token) and
// CAS helpers that upload only what FindMissingBlobs reports missing, in
// batches for small blobs and over ByteStream for large ones.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/rbs-build/rbs/rbe/auth"
	"github.com/rbs-build/rbs/rbe/codec"
	"github.com/rbs-build/rbs/rbe/via"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// Options says how to reach a server.
type Options struct {
	// Target is "host:port", "grpc://host:port" (plaintext) or
	// "grpcs://host:port" (TLS), or a comma-separated list of them, the
	// servers of one cluster: calls go to the first that answers, and a
	// call that finds none available is retried for a while, as one of
	// them takes over from another.
	Target string
	// Token is sent as "authorization: Bearer <token>" when set.
	Token string
	// TokenFile, when set, holds the token instead; it is read at each
	// Dial.
	TokenFile string
	// CACert is a PEM file of the CA that signed the server's certificate,
	// for grpcs targets with private certificates.
	CACert string
}

const (
	// maxMessageSize matches the server's limit.
	maxMessageSize = 16 << 20
	// windowSize is the HTTP/2 flow-control window per stream and connection.
	windowSize = 16 << 20
	// socketBufferSize is how much a connection reads or writes a system
	// call at a time.
	socketBufferSize = 1 << 20
)

// Dial connects to the server, or the servers, described by o.
func Dial(o Options) (*grpc.ClientConn, error) {
	addrs, secure, err := ParseTargets(o.Target)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize), grpc.ForceCodecV2(codec.Codec{})),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithWriteBufferSize(socketBufferSize),
		grpc.WithReadBufferSize(socketBufferSize),
		grpc.WithChainUnaryInterceptor(readableUnary),
		grpc.WithChainStreamInterceptor(readableStream),
		// A server that stops answering (a stopped process, a machine
		// cut off) is found gone while a stream is open, a worker's
		// say, so that it goes to another server.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
	}
	// A server's calls to another (a grpc:// backend) say which servers
	// the call they serve passed through.
	opts = append(opts, via.DialOptions()...)
	addr := addrs[0]
	if len(addrs) > 1 {
		// The first server that answers takes the calls (gRPC's
		// pick_first over the list), and calls that find none
		// available wait for a takeover.
		r := manual.NewBuilderWithScheme("rbs-servers")
		var list []resolver.Address
		for _, a := range addrs {
			host, _, _ := net.SplitHostPort(a)
			list = append(list, resolver.Address{Addr: a, ServerName: host})
		}
		r.InitialState(resolver.State{Addresses: list})
		opts = append(opts, grpc.WithResolvers(r), grpc.WithChainUnaryInterceptor(failoverUnary))
		addr = r.Scheme() + ":///cluster"
	}
	if secure {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CACert != "" {
			pem, err := os.ReadFile(o.CACert)
			if err != nil {
				return nil, fmt.Errorf("reading CA certificate: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA certificate %s holds no PEM certificate", o.CACert)
			}
			cfg.RootCAs = pool
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.TokenFile != "" {
		if o.Token, err = auth.ReadTokenFile(o.TokenFile); err != nil {
			return nil, err
		}
	}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Bearer{Token: o.Token, Secure: secure}))
	}
	return grpc.NewClient(addr, opts...)
}

// ParseTargets splits a comma-separated list of server addresses (see
// ParseTarget) into their host:port forms and whether they use TLS, which
// all must or none.
func ParseTargets(targets string) (addrs []string, secure bool, err error) {
	for i, t := range strings.Split(targets, ",") {
		addr, s, err := ParseTarget(strings.TrimSpace(t))
		if err != nil {
			return nil, false, err
		}
		if i > 0 && s != secure {
			return nil, false, fmt.Errorf("servers %q: use grpcs:// for all of them or for none", targets)
		}
		addrs, secure = append(addrs, addr), s
	}
	return addrs, secure, nil
}

// failoverWait is how long a call to a cluster of several servers is
// retried while it finds none available: longer than a standby takes to
// take over.
const failoverWait = 30 * time.Second

// failoverUnary retries a call that failed UNAVAILABLE (no server of the
// list reached, or a standby that knows no active server yet) until
// failoverWait has passed. Every call rbs makes can be repeated: a
// submission carries an idempotency key.
func failoverUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	deadline := time.Now().Add(failoverWait)
	backoff := 100 * time.Millisecond
	for {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if status.Code(err) != codes.Unavailable || time.Now().Add(backoff).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ParseTarget splits a server address into host:port and whether it uses TLS.
func ParseTarget(target string) (addr string, secure bool, err error) {
	switch {
	case target == "":
		return "", false, fmt.Errorf("no server given: pass --server HOST:PORT or set RBS_REMOTE")
	case strings.HasPrefix(target, "grpcs://"):
		addr, secure = strings.TrimPrefix(target, "grpcs://"), true
	case strings.HasPrefix(target, "grpc://"):
		addr = strings.TrimPrefix(target, "grpc://")
	case strings.Contains(target, "://"):
		return "", false, fmt.Errorf("server %q: unsupported scheme, use grpc:// or grpcs://", target)
	default:
		addr = target
	}
	if i := strings.LastIndex(addr, ":"); i <= 0 && !strings.HasPrefix(addr, ":") || strings.Contains(addr, "/") {
		return "", false, fmt.Errorf("server %q: want HOST:PORT", target)
	}
	return addr, secure, nil
}

// Ping calls ctx-bounded Capabilities to check the server answers.
func Ping(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := capabilities(ctx, conn)
	return err
}
