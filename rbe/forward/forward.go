// Package forward provides Proxy, a gRPC server that forwards every call it
// gets, of any service, to another server as raw frames, with its metadata
// (the bearer token included: the server forwarded to checks it), and
// brings back its messages, headers, trailers and status. A standby server
// serves one, forwarding to the active server, until it becomes active
// itself; while no active server is known it answers UNAVAILABLE, which
// clients retry.
package forward

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Proxy forwards calls to its target.
type Proxy struct {
	dial func(target string) (*grpc.ClientConn, error)

	mu     sync.Mutex
	target string
	conn   *grpc.ClientConn
}

// New returns a Proxy that dials its targets with dial, and forwards to no
// one until SetTarget names one.
func New(dial func(target string) (*grpc.ClientConn, error)) *Proxy {
	return &Proxy{dial: dial}
}

// SetTarget forwards calls from now on to the server at target (host:port,
// or another form dial takes). Calls in flight go on to the old target.
func (p *Proxy) SetTarget(target string) error {
	conn, err := p.dial(target)
	if err != nil {
		return err
	}
	p.mu.Lock()
	old := p.conn
	p.target, p.conn = target, conn
	p.mu.Unlock()
	if old != nil {
		go old.Close() // once its calls end: Close cancels them
	}
	return nil
}

// Close closes the connection to the target.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}

// Server returns a gRPC server that forwards every call, with opts added
// (message size limits, say).
func (p *Proxy) Server(opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.UnknownServiceHandler(p.handle), grpc.ForceServerCodec(rawCodec{}))
	return grpc.NewServer(opts...)
}

func (p *Proxy) current() (string, *grpc.ClientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target, p.conn
}

// hopHeaders are metadata of the transport, which the forwarded call sets
// for itself.
func hopHeader(key string) bool {
	return strings.HasPrefix(key, ":") || strings.HasPrefix(key, "grpc-") ||
		key == "content-type" || key == "user-agent" || key == "te"
}

func (p *Proxy) handle(_ any, in grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(in)
	if !ok {
		return status.Error(codes.Internal, "forwarding a call without a method")
	}
	target, conn := p.current()
	if conn == nil {
		return status.Error(codes.Unavailable, "this server is a standby and knows no active server yet; try again in a moment")
	}
	md, _ := metadata.FromIncomingContext(in.Context())
	out := metadata.MD{}
	for k, v := range md {
		if !hopHeader(k) {
			out[k] = v
		}
	}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(in.Context(), out))
	defer cancel()
	fwd, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return unavailable(target, err)
	}
	// Requests flow to the target until the client half-closes; a client
	// gone cancels the forwarded call.
	go func() {
		for {
			f := new(frame)
			if err := in.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					fwd.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if fwd.SendMsg(f) != nil {
				return // the target's status comes with RecvMsg
			}
		}
	}()
	for first := true; ; first = false {
		f := new(frame)
		err := fwd.RecvMsg(f)
		if first {
			if md, herr := fwd.Header(); herr == nil && len(md) > 0 {
				in.SendHeader(md)
			}
		}
		if err != nil {
			in.SetTrailer(fwd.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return unavailable(target, err)
		}
		if err := in.SendMsg(f); err != nil {
			return err
		}
	}
}

// unavailable keeps the target's own status, but says which server a
// connection failure was with.
func unavailable(target string, err error) error {
	s := status.Convert(err)
	if s.Code() == codes.Unavailable {
		return status.Errorf(codes.Unavailable, "forwarding to the active server %s: %s", target, s.Message())
	}
	return err
}

// frame is one message, as bytes.
type frame struct{ b []byte }

// rawCodec passes frames through unread.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, status.Errorf(codes.Internal, "forwarding a %T, not a frame", v)
	}
	return f.b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return status.Errorf(codes.Internal, "forwarding into a %T, not a frame", v)
	}
	f.b = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }
