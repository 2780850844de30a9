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
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

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
	User string
	// Users are named user tokens, by name: a call that bears one is made
	// by the user of that name.
	Users  map[string]string
	Worker string
}

// Set reports whether any token is set.
func (t Tokens) Set() bool { return t.User != "" || len(t.Users) > 0 || t.Worker != "" }

// UserTokens lists every token of the User role, the unnamed one first.
func (t Tokens) UserTokens() []string {
	var out []string
	if t.User != "" {
		out = append(out, t.User)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Users)) {
		out = append(out, t.Users[name])
	}
	return out
}

// Checker verifies the bearer token of incoming calls against the roles
// their method allows.
type Checker struct {
	user, worker []byte // sha256 of the tokens; nil when unset
	users        []named
	// allowed returns the roles that may call a full method name.
	allowed func(method string) Role
}

// named is a named user token's sha256.
type named struct {
	name string
	hash []byte
}

// NewChecker returns a Checker for tokens, with allowed giving the roles
// each method admits. It returns nil (authentication off) when no token is
// set.
func NewChecker(tokens Tokens, allowed func(method string) Role) *Checker {
	if !tokens.Set() {
		return nil
	}
	c := &Checker{allowed: allowed}
	if tokens.User != "" {
		h := sha256.Sum256([]byte(tokens.User))
		c.user = h[:]
	}
	for _, name := range slices.Sorted(maps.Keys(tokens.Users)) {
		h := sha256.Sum256([]byte(tokens.Users[name]))
		c.users = append(c.users, named{name, h[:]})
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
	_, err := c.authorize(ctx, method)
	return err
}

// authorize is Check that also returns the name of the user whose named
// token ctx carries ("" for another token).
func (c *Checker) authorize(ctx context.Context, method string) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return "", status.Error(codes.Unauthenticated, "missing authorization header: send \"authorization: Bearer <token>\" (RBS_REMOTE_TOKEN)")
	}
	var role Role
	user := ""
	for _, v := range vals {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			continue
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if c.user != nil && subtle.ConstantTimeCompare(got[:], c.user) == 1 {
			role |= User
		}
		for _, u := range c.users { // all of them, whichever matches
			if subtle.ConstantTimeCompare(got[:], u.hash) == 1 {
				role |= User
				user = u.name
			}
		}
		if c.worker != nil && subtle.ConstantTimeCompare(got[:], c.worker) == 1 {
			role |= Worker
		}
	}
	if role == 0 {
		return "", status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	if role&c.allowed(method) == 0 {
		if role == User {
			return "", status.Errorf(codes.PermissionDenied, "%s needs the worker token (--worker-token-file): a user token cannot act as a worker", method)
		}
		return "", status.Errorf(codes.PermissionDenied, "%s is not open to the worker token", method)
	}
	return user, nil
}

// userKey is the context key of the user a call is made by.
type userKey struct{}

// UserName returns the name of the user whose named token the call of ctx
// bore; "" for a call that bore another token, or none.
func UserName(ctx context.Context) string {
	name, _ := ctx.Value(userKey{}).(string)
	return name
}

// withUser is ctx of a call made by the user name ("": ctx itself).
func withUser(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, userKey{}, name)
}

// userStream is a server stream whose context names its user.
type userStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s userStream) Context() context.Context { return s.ctx }

// ServerOptions returns interceptors that check every unary and streaming
// call, or nothing when c is nil.
func (c *Checker) ServerOptions() []grpc.ServerOption {
	if c == nil {
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		user, err := c.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(withUser(ctx, user), req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		user, err := c.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		if user != "" {
			ss = userStream{ss, withUser(ss.Context(), user)}
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

// userName is what a named token's name may be.
var userName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`) })

// ReadUsersFile returns the named user tokens held in the file at path,
// by name: one "NAME TOKEN" a line; blank lines and lines starting with #
// are skipped. A bad name, a line without a token, a name or a token given
// twice, or a file with none is an error that names the line (never the
// token).
func ReadUsersFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading users file: %w", err)
	}
	users, tokens := map[string]string{}, map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		where := fmt.Sprintf("users file %s, line %d", path, i+1)
		switch {
		case len(fields) != 2:
			return nil, fmt.Errorf("%s: want NAME TOKEN", where)
		case !userName().MatchString(fields[0]):
			return nil, fmt.Errorf("%s: user name %q: want letters, digits, '.', '_', '@' or '-', at most 64", where, fields[0])
		case users[fields[0]] != "":
			return nil, fmt.Errorf("%s: user %s is named twice", where, fields[0])
		case tokens[fields[1]] != "":
			return nil, fmt.Errorf("%s: user %s has the token of user %s", where, fields[0], tokens[fields[1]])
		}
		users[fields[0]], tokens[fields[1]] = fields[1], fields[0]
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("users file %s names no user", path)
	}
	return users, nil
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
