package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recovery returns interceptors that turn a panic in any handler into an
// INTERNAL error for that one call, logging the stack, so that no request
// can take the server down. They are the last line of defence: handlers
// validate their input first.
func recovery(log *slog.Logger) []grpc.ServerOption {
	caught := func(method string, r any) error {
		log.Error("panic in handler", "method", method, "panic", r, "stack", string(debug.Stack()))
		return status.Errorf(codes.Internal, "internal error in %s; the server logged it and keeps serving", method)
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, caught(info.FullMethod, r)
			}
		}()
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = caught(info.FullMethod, r)
			}
		}()
		return h(srv, ss)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}
