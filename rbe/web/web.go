// Package web provides the HTTP side of an rbs server's one port: the
// handler of its web endpoint (a login page, Prometheus metrics at /metrics,
// JSON APIs under /api/ and the dashboard, all behind the user token) and
// the Splitter that lets HTTP share the port with gRPC.
//
// How the port is shared: without TLS, a connection that opens with the
// HTTP/2 client preface is a gRPC client's (browsers speak HTTP/2 only over
// TLS) and goes to the native grpc.Server untouched, so gRPC performs and
// behaves as on a port of its own; every other connection is HTTP/1.x and
// goes to a net/http server. With TLS, browsers speak HTTP/2 too, so one
// connection tells nothing: a net/http server terminates TLS, offering h2 and
// http/1.1, and sends each request whose content type is application/grpc to
// grpc.Server.ServeHTTP, the rest to this handler (rbe/server does this).
//
// Authentication: with user tokens, every path but /login needs either
// "Authorization: Bearer <token>" with one of them or the cookie that /login
// sets once given one: an HMAC of a fixed string keyed with the token, never
// the token itself. Without a token (a server on loopback only) nothing is asked.
package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is what the web endpoint serves.
type Config struct {
	// Tokens are the user tokens, any of which opens the endpoint; none
	// asks for no authentication.
	Tokens []string
	// Metrics is served at /metrics in the Prometheus text format; nil
	// serves no /metrics.
	Metrics prometheus.Gatherer
	// MetricsPublic serves /metrics without authentication.
	MetricsPublic bool
	// Routes are handlers of other packages by http.ServeMux pattern, each
	// under /api/ (such as "GET /api/jobs/{id}"), behind the same
	// authentication. New panics on a pattern outside /api/.
	Routes map[string]http.Handler
	// Dashboard serves every other path; nil serves a page at / saying that
	// no dashboard is built in, and 404 elsewhere.
	Dashboard http.Handler
}

// CookieName is the name of the cookie /login sets.
const CookieName = "rbs_session"

// sessionLabel is what the session cookie's HMAC is of.
const sessionLabel = "rbs web session v1"

// maxLoginForm bounds the bytes of a POST /login body that are read.
const maxLoginForm = 4 << 10

// New returns the handler of the web endpoint.
func New(cfg Config) http.Handler {
	a := newAuth(cfg.Tokens)
	app := http.NewServeMux()
	for pattern, h := range cfg.Routes {
		if !underAPI(pattern) {
			panic(fmt.Sprintf("web route %q is not under /api/", pattern))
		}
		app.Handle(pattern, h)
	}
	HandleProfiles(app)
	if cfg.Dashboard != nil {
		app.Handle("/", cfg.Dashboard)
	} else {
		app.HandleFunc("GET /{$}", noDashboard)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", a.login)
	mux.Handle("/", a.require(app))
	if cfg.Metrics != nil {
		var metrics http.Handler = promhttp.HandlerFor(cfg.Metrics, promhttp.HandlerOpts{})
		if !cfg.MetricsPublic {
			metrics = a.require(metrics)
		}
		mux.Handle("/metrics", metrics)
	}
	return mux
}

// HandleProfiles serves Go's runtime profiles on mux under /debug/pprof/,
// as net/http/pprof does: heap (with ?gc=1, after a collection), goroutine,
// CPU (profile), trace and the rest, for `go tool pprof URL`.
func HandleProfiles(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// underAPI reports whether a ServeMux pattern ("[METHOD ][HOST]/PATH")
// matches paths under /api/ only.
func underAPI(pattern string) bool {
	if _, rest, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(rest, " ")
	}
	return strings.HasPrefix(pattern, "/api/")
}

// auth checks requests against the user token.
type auth struct {
	keys []key // none without a token
}

// key is one user token as the endpoint checks it.
type key struct {
	token   []byte // sha256 of the token
	session string // the cookie's value, hex
}

func newAuth(tokens []string) *auth {
	a := &auth{}
	for _, t := range tokens {
		h := sha256.Sum256([]byte(t))
		mac := hmac.New(sha256.New, []byte(t))
		mac.Write([]byte(sessionLabel))
		a.keys = append(a.keys, key{token: h[:], session: hex.EncodeToString(mac.Sum(nil))})
	}
	return a
}

// match returns the key of token, nil for none; every key is compared, in
// constant time.
func (a *auth) match(token string) *key {
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	var found *key
	for i := range a.keys {
		if subtle.ConstantTimeCompare(got[:], a.keys[i].token) == 1 {
			found = &a.keys[i]
		}
	}
	return found
}

// ok reports whether r bears a token or a session cookie; without a
// token, every request does. Comparisons take constant time.
func (a *auth) ok(r *http.Request) bool {
	if len(a.keys) == 0 {
		return true
	}
	if scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "bearer") && a.match(tok) != nil {
		return true
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return false
	}
	ok := false
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(k.session)) == 1 {
			ok = true
		}
	}
	return ok
}

// require serves h to authenticated requests; it sends a browser to the
// login page and answers anything else 401.
func (a *auth) require(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.ok(r) {
			h.ServeHTTP(w, r)
			return
		}
		if browser(r) {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="rbs"`)
		http.Error(w, "unauthenticated: send \"Authorization: Bearer <token>\" (RBS_REMOTE_TOKEN), or log in at /login", http.StatusUnauthorized)
	})
}

// browser reports whether r is a browser asking for a page, which is better
// sent to the login page than answered 401: a GET or HEAD that accepts HTML,
// outside the JSON APIs.
func browser(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(r.Header.Get("Accept"), "text/html") &&
		!strings.HasPrefix(r.URL.Path, "/api/")
}

// login serves the login form (GET) and checks the token it posts (POST):
// the right one sets the session cookie and goes to /, a wrong one shows
// the form again, with 401. Without a token there is nothing to log in to.
func (a *auth) login(w http.ResponseWriter, r *http.Request) {
	if len(a.keys) == 0 {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		loginPage(w, http.StatusOK, "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
		tok := r.PostFormValue("token")
		k := a.match(tok)
		if tok == "" || k == nil {
			loginPage(w, http.StatusUnauthorized, "That token is wrong.")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: k.session, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method "+r.Method+" not allowed on /login", http.StatusMethodNotAllowed)
	}
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rbs: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:sans-serif;max-width:28em;margin:4em auto;padding:0 1em}input{font-size:1em;padding:.3em}.error{color:#b00}</style>
</head><body>
<h1>rbs</h1>
{{if .}}<p class="error">{{.}}</p>{{end}}
<form method="post" action="/login">
<label for="token">Token (RBS_REMOTE_TOKEN)</label><br>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
<button type="submit">Log in</button>
</form>
</body></html>
`))

// loginPage writes the login form with status code and an error line.
func loginPage(w http.ResponseWriter, code int, problem string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(code)
	loginTemplate.Execute(w, problem)
}

// noDashboard is / on a server without a dashboard.
func noDashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rbs</title></head><body>
<h1>rbs</h1>
<p>This server has no dashboard built in. Its metrics are at <a href="/metrics">/metrics</a>.</p>
</body></html>
`)
}
