package client

import (
	"context"
	"io"
	"strings"
	"unicode"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StatusError is a failed RPC as users read it: the server's message, led by
// what went wrong where the message alone does not say. It keeps the gRPC
// status, so status.Code and status.FromError see through it.
type StatusError struct {
	s *status.Status
}

// Error gives the status as a sentence, without gRPC's "rpc error: code ="
// framing.
func (e *StatusError) Error() string {
	switch e.s.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.OutOfRange:
		return e.s.Message()
	case codes.Unavailable:
		msg := e.s.Message()
		if strings.HasPrefix(msg, "the server ") || strings.HasPrefix(msg, "this server ") {
			// Reached, the server says why it cannot serve now.
			return msg
		}
		if _, dial, ok := strings.Cut(msg, "Error while dialing: "); ok {
			msg = strings.TrimSuffix(dial, `"`)
		}
		return "cannot reach the server: " + msg
	}
	return codeWords(e.s.Code()) + ": " + e.s.Message()
}

// GRPCStatus returns the status the server sent.
func (e *StatusError) GRPCStatus() *status.Status { return e.s }

// codeWords spells a code as lower-case words: DeadlineExceeded becomes
// "deadline exceeded".
func codeWords(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// readable turns a gRPC status error into a StatusError and leaves any other
// error, io.EOF included, as it is.
func readable(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if _, ok := err.(*StatusError); ok {
		return err
	}
	s, ok := status.FromError(err)
	if !ok || s.Code() == codes.OK {
		return err
	}
	return &StatusError{s: s}
}

func readableUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return readable(invoker(ctx, method, req, reply, cc, opts...))
}

func readableStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, readable(err)
	}
	return readableClientStream{s}, nil
}

type readableClientStream struct{ grpc.ClientStream }

func (s readableClientStream) SendMsg(m any) error { return readable(s.ClientStream.SendMsg(m)) }
func (s readableClientStream) RecvMsg(m any) error { return readable(s.ClientStream.RecvMsg(m)) }
