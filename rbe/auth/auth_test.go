package auth

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestChecker(t *testing.T) {
	c := NewChecker("s3cret")
	tests := []struct {
		name   string
		header []string
		want   codes.Code
	}{
		{"right token", []string{"Bearer s3cret"}, codes.OK},
		{"lowercase scheme", []string{"bearer s3cret"}, codes.OK},
		{"one of several headers", []string{"Basic xyz", "Bearer s3cret"}, codes.OK},
		{"wrong token", []string{"Bearer nope"}, codes.Unauthenticated},
		{"prefix of token", []string{"Bearer s3cre"}, codes.Unauthenticated},
		{"token without scheme", []string{"s3cret"}, codes.Unauthenticated},
		{"other scheme", []string{"Basic s3cret"}, codes.Unauthenticated},
		{"missing", nil, codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.header != nil {
				md := metadata.MD{}
				md.Append("authorization", tt.header...)
				ctx = metadata.NewIncomingContext(ctx, md)
			}
			err := c.Check(ctx)
			if status.Code(err) != tt.want {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error reveals the token: %v", err)
			}
		})
	}
}

func TestNoTokenDisablesAuth(t *testing.T) {
	if NewChecker("") != nil {
		t.Fatal("NewChecker(\"\") should disable authentication")
	}
	if opts := (*Checker)(nil).ServerOptions(); opts != nil {
		t.Fatalf("nil checker has server options %v", opts)
	}
}

func TestBearerMetadata(t *testing.T) {
	md, err := Bearer{Token: "t"}.GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer t" {
		t.Fatalf("GetRequestMetadata = %v, %v", md, err)
	}
}
