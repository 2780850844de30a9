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

func TestNamedUsers(t *testing.T) {
	c := NewChecker(Tokens{User: "shared", Users: map[string]string{"ann": "ann-tok", "bob": "bob-tok"}, Worker: "w0rker"}, roles)
	tests := []struct {
		header string
		method string
		want   codes.Code
		user   string
	}{
		{"Bearer ann-tok", "/u", codes.OK, "ann"},
		{"Bearer bob-tok", "/b", codes.OK, "bob"},
		{"Bearer shared", "/u", codes.OK, ""},
		{"Bearer ann-tok", "/w", codes.PermissionDenied, ""},
		{"Bearer ann-to", "/u", codes.Unauthenticated, ""},
	}
	for _, tt := range tests {
		t.Run(tt.header+" "+tt.method, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", tt.header))
			user, err := c.authorize(ctx, tt.method)
			if status.Code(err) != tt.want || user != tt.user {
				t.Fatalf("authorize = %q, %v; want %q, %v", user, err, tt.user, tt.want)
			}
			if got := UserName(withUser(ctx, user)); got != tt.user {
				t.Fatalf("UserName = %q, want %q", got, tt.user)
			}
		})
	}
}

func TestReadUsersFile(t *testing.T) {
	tests := []struct {
		name, text string
		want       map[string]string
		err        string
	}{
		{"two users", "# team\nann tok-a\n\nbob  tok-b\n", map[string]string{"ann": "tok-a", "bob": "tok-b"}, ""},
		{"no token", "ann\n", nil, "line 1: want NAME TOKEN"},
		{"bad name", "a/b tok\n", nil, `line 1: user name "a/b"`},
		{"a name twice", "ann x\nann y\n", nil, "line 2: user ann is named twice"},
		{"a token twice", "ann x\nbob x\n", nil, "line 2: user bob has the token of user ann"},
		{"empty", "# nobody\n", nil, "names no user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "users")
			if err := os.WriteFile(p, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadUsersFile(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "tok-") || strings.Contains(err.Error(), " x") {
					t.Fatalf("error reveals a token: %v", err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}
