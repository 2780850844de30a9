// Package auth provides bearer-token authentication and roles for every rbs
// gRPC service: a Checker whose server interceptors require
// "authorization: Bearer <token>" and let each token call only the methods
// of its Role, the matching client credentials (Bearer), and ReadTokenFile.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Role is a set of callers: the holders of one kind of token.
type Role uint8

const (
	// User is whoever holds the user token: build clients, job commands.
	User Role = 1 << iota
	// Worker is whoever holds the worker token: the machines that run
	// actions and jobs, and so receive every user's commands.
	Worker
)

// Tokens are the secrets of each role; an empty one means no one holds
// that role.
type Tokens struct {
	User   string
	Worker string
}

// Checker verifies the bearer token of incoming calls against the roles
// their method allows.
type Checker struct {
	user, worker []byte // sha256 of the tokens; nil when unset
	// allowed returns the roles that may call a full method name.
	allowed func(method string) Role
}

// NewChecker returns a Checker for tokens, with allowed giving the roles
// each method admits. It returns nil (authentication off) when neither
// token is set.
func NewChecker(tokens Tokens, allowed func(method string) Role) *Checker {
	if tokens.User == "" && tokens.Worker == "" {
		return nil
	}
	c := &Checker{allowed: allowed}
	if tokens.User != "" {
		h := sha256.Sum256([]byte(tokens.User))
		c.user = h[:]
	}
	if tokens.Worker != "" {
		h := sha256.Sum256([]byte(tokens.Worker))
		c.worker = h[:]
	}
	return c
}

// Check returns nil when ctx carries the token of a role that may call
// method, UNAUTHENTICATED when it carries no valid token, and
// PERMISSION_DENIED when its token's role may not call method. Comparison is
// constant-time; the presented token never appears in errors.
func (c *Checker) Check(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "missing authorization header: send \"authorization: Bearer <token>\" (RBS_REMOTE_TOKEN)")
	}
	var role Role
	for _, v := range vals {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			continue
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if c.user != nil && subtle.ConstantTimeCompare(got[:], c.user) == 1 {
			role |= User
		}
		if c.worker != nil && subtle.ConstantTimeCompare(got[:], c.worker) == 1 {
			role |= Worker
		}
	}
	if role == 0 {
		return status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	if role&c.allowed(method) == 0 {
		if role == User {
			return status.Errorf(codes.PermissionDenied, "%s needs the worker token (--worker-token-file): a user token cannot act as a worker", method)
		}
		return status.Errorf(codes.PermissionDenied, "%s is not open to the worker token", method)
	}
	return nil
}

// ServerOptions returns interceptors that check every unary and streaming
// call, or nothing when c is nil.
func (c *Checker) ServerOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := c.Check(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := c.Check(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return h(srv, ss)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// ReadTokenFile returns the token held in the file at path, without
// surrounding white space. An empty file is an error: it would turn
// authentication off without anyone meaning to.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("token file %s holds more than one line", path)
	}
	return tok, nil
}

// Bearer is client credentials that send a bearer token on every call.
type Bearer struct {
	Token string
	// Secure requires a TLS connection before the token is sent.
	Secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b Bearer) RequireTransportSecurity() bool { return b.Secure }
