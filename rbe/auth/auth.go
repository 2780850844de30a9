// Package auth provides bearer-token authentication for every rbs gRPC
// service: server interceptors that require "authorization: Bearer <token>"
// and the matching client credentials.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Checker verifies the bearer token of incoming calls.
type Checker struct {
	want [sha256.Size]byte
}

// NewChecker returns a Checker for token, or nil when token is empty
// (authentication off).
func NewChecker(token string) *Checker {
	if token == "" {
		return nil
	}
	return &Checker{want: sha256.Sum256([]byte(token))}
}

// Check returns an UNAUTHENTICATED error unless ctx carries the token.
// Comparison is constant-time; the presented token never appears in errors.
func (c *Checker) Check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "missing authorization header: send \"authorization: Bearer <token>\" (RBS_REMOTE_TOKEN)")
	}
	for _, v := range vals {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			continue
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if subtle.ConstantTimeCompare(got[:], c.want[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "invalid bearer token")
}

// ServerOptions returns interceptors that check every unary and streaming
// call, or nothing when c is nil.
func (c *Checker) ServerOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := c.Check(ctx); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := c.Check(ss.Context()); err != nil {
			return err
		}
		return h(srv, ss)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
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
