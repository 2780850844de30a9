package client

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestReadable(t *testing.T) {
	plain := errors.New("plain")
	for _, tc := range []struct {
		in   error
		text string
		code codes.Code
	}{
		{status.Error(codes.NotFound, "job 99 not found"), "job 99 not found", codes.NotFound},
		{status.Error(codes.InvalidArgument, `invalid --array "0-99%0"`), `invalid --array "0-99%0"`, codes.InvalidArgument},
		{status.Error(codes.Unavailable, "connection refused"), "cannot reach the server: connection refused", codes.Unavailable},
		{
			status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`),
			"cannot reach the server: dial tcp 127.0.0.1:1: connect: connection refused", codes.Unavailable,
		},
		{
			status.Error(codes.Unavailable, "the server cannot record job state (disk I/O error): nothing of this request was recorded; try again later"),
			"the server cannot record job state (disk I/O error): nothing of this request was recorded; try again later", codes.Unavailable,
		},
		{status.Error(codes.DeadlineExceeded, "too slow"), "deadline exceeded: too slow", codes.DeadlineExceeded},
		{status.Error(codes.Unauthenticated, "bad token"), "unauthenticated: bad token", codes.Unauthenticated},
		{plain, "plain", codes.Unknown},
	} {
		got := readable(tc.in)
		if got.Error() != tc.text {
			t.Errorf("%v: text %q, want %q", tc.in, got.Error(), tc.text)
		}
		if c := status.Code(got); c != tc.code {
			t.Errorf("%v: code %v, want %v", tc.in, c, tc.code)
		}
		if c := status.Code(fmt.Errorf("wrapped: %w", got)); c != tc.code {
			t.Errorf("%v wrapped: code %v, want %v", tc.in, c, tc.code)
		}
	}
	for _, err := range []error{nil, io.EOF, plain} {
		if got := readable(err); got != err {
			t.Errorf("readable(%v) = %v, want it unchanged", err, got)
		}
	}
}
