package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// roles admits workers alone to "/w", users alone to "/u", both to "/b".
func roles(method string) Role {
	switch method {
	case "/w":
		return Worker
	case "/u":
		return User
	}
	return User | Worker
}

func TestChecker(t *testing.T) {
	c := NewChecker(Tokens{User: "s3cret", Worker: "w0rker"}, roles)
	tests := []struct {
		name   string
		header []string
		method string
		want   codes.Code
	}{
		{"right token", []string{"Bearer s3cret"}, "/u", codes.OK},
		{"lowercase scheme", []string{"bearer s3cret"}, "/u", codes.OK},
		{"one of several headers", []string{"Basic xyz", "Bearer s3cret"}, "/u", codes.OK},
		{"wrong token", []string{"Bearer nope"}, "/u", codes.Unauthenticated},
		{"prefix of token", []string{"Bearer s3cre"}, "/u", codes.Unauthenticated},
		{"token without scheme", []string{"s3cret"}, "/u", codes.Unauthenticated},
		{"other scheme", []string{"Basic s3cret"}, "/u", codes.Unauthenticated},
		{"missing", nil, "/u", codes.Unauthenticated},
		{"user on worker method", []string{"Bearer s3cret"}, "/w", codes.PermissionDenied},
		{"worker on worker method", []string{"Bearer w0rker"}, "/w", codes.OK},
		{"worker on user method", []string{"Bearer w0rker"}, "/u", codes.PermissionDenied},
		{"worker on shared method", []string{"Bearer w0rker"}, "/b", codes.OK},
		{"user on shared method", []string{"Bearer s3cret"}, "/b", codes.OK},
		{"wrong token on worker method", []string{"Bearer nope"}, "/w", codes.Unauthenticated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.header != nil {
				md := metadata.MD{}
				md.Append("authorization", tt.header...)
				ctx = metadata.NewIncomingContext(ctx, md)
			}
			err := c.Check(ctx, tt.method)
			if status.Code(err) != tt.want {
				t.Fatalf("Check = %v, want %v", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "w0rker")) {
				t.Fatalf("error reveals a token: %v", err)
			}
		})
	}
}

func TestUnsetWorkerTokenAdmitsNoWorker(t *testing.T) {
	c := NewChecker(Tokens{User: "s3cret"}, roles)
	md := metadata.Pairs("authorization", "Bearer ")
	if err := c.Check(metadata.NewIncomingContext(context.Background(), md), "/w"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("empty bearer on a worker method = %v, want UNAUTHENTICATED", err)
	}
	md = metadata.Pairs("authorization", "Bearer s3cret")
	if err := c.Check(metadata.NewIncomingContext(context.Background(), md), "/w"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("user token on a worker method = %v, want PERMISSION_DENIED", err)
	}
}

func TestNoTokenDisablesAuth(t *testing.T) {
	if NewChecker(Tokens{}, roles) != nil {
		t.Fatal("NewChecker without tokens should disable authentication")
	}
	if opts := (*Checker)(nil).ServerOptions(); opts != nil {
		t.Fatalf("nil checker has server options %v", opts)
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want, err string
	}{
		{"plain", "abc", "abc", ""},
		{"trailing newline", "abc\n", "abc", ""},
		{"empty", "", "", "is empty"},
		{"blank", " \n", "", "is empty"},
		{"two lines", "abc\ndef\n", "", "more than one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadTokenFile(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ReadTokenFile = %q, %v; want error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ReadTokenFile = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

func TestBearerMetadata(t *testing.T) {
	md, err := Bearer{Token: "t"}.GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer t" {
		t.Fatalf("GetRequestMetadata = %v, %v", md, err)
	}
}
