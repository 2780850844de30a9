// Package via marks the calls one rbs server makes to another, through a
// grpc:// CAS or action-cache backend, with the servers the request has
// passed through, so that a server that finds itself among them refuses
// the call: a backend that leads back to its own server (--cas
// grpc://ITSELF, or A to B to A) would otherwise call itself for ever.
//
// A server's interceptors (ServerOptions) check the incoming list and put
// it, with the server's own id, in the context of the call; the client's
// interceptors (DialOptions) send what the context holds with every call
// made on its behalf.
package via

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// header is the metadata key that lists the servers a call passed through.
const header = "rbs-via"

type key struct{}

// NewID returns a random id for a server.
func NewID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// check refuses a call that has passed through the server id already, and
// returns ctx holding the servers it passed through, id last.
func check(ctx context.Context, id string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	passed := md.Get(header)
	if slices.Contains(passed, id) {
		return nil, status.Errorf(codes.FailedPrecondition, "this call came back to the server it passed through (%d servers on the way): a grpc:// backend of --cas or --ac leads back to this server; give it another server's address", len(passed))
	}
	return context.WithValue(ctx, key{}, append(slices.Clip(passed), id)), nil
}

// stream is a server stream with the context check made.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stream) Context() context.Context { return s.ctx }

// ServerOptions returns the interceptors of the server id.
func ServerOptions(id string) []grpc.ServerOption {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := check(ctx, id)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	streaming := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := check(ss.Context(), id)
		if err != nil {
			return err
		}
		return h(srv, stream{ss, ctx})
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(streaming)}
}

// outgoing adds to ctx's outgoing metadata the servers a call made on
// behalf of the call of ctx passed through.
func outgoing(ctx context.Context) context.Context {
	passed, _ := ctx.Value(key{}).([]string)
	if len(passed) == 0 {
		return ctx
	}
	kv := make([]string, 0, 2*len(passed))
	for _, id := range passed {
		kv = append(kv, header, id)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// DialOptions returns the interceptors of a client connection.
func DialOptions() []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(outgoing(ctx), method, req, reply, cc, opts...)
	}
	streaming := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(outgoing(ctx), desc, cc, method, opts...)
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(streaming)}
}
