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
	"os"
	"strings"

	"github.com/rbs-build/rbs/rbe/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Options says how to reach a server.
type Options struct {
	// Target is "host:port", "grpc://host:port" (plaintext) or
	// "grpcs://host:port" (TLS).
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
)

// Dial connects to the server described by o.
func Dial(o Options) (*grpc.ClientConn, error) {
	addr, secure, err := ParseTarget(o.Target)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithChainUnaryInterceptor(readableUnary),
		grpc.WithChainStreamInterceptor(readableStream),
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
