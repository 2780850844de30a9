package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

const token = "s3cret-token"

// handler is the web endpoint with a token (unless none), a registry holding
// one counter, a JSON route under /api/ and the dashboard given.
func handler(t *testing.T, tok string, metricsPublic bool, dashboard http.Handler) http.Handler {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "rbs_test_things_total", Help: "Things."})
	c.Add(3)
	reg.MustRegister(c)
	var tokens []string
	if tok != "" {
		tokens = []string{"another-token", tok}
	}
	return New(Config{
		Tokens:        tokens,
		Metrics:       reg,
		MetricsPublic: metricsPublic,
		Dashboard:     dashboard,
		Routes: map[string]http.Handler{
			"GET /api/thing": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"thing":1}`))
			}),
		},
	})
}

func get(h http.Handler, path string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	for k, vs := range header {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var (
	page      = http.Header{"Accept": {"text/html,application/xhtml+xml,*/*;q=0.8"}}
	bearer    = http.Header{"Authorization": {"Bearer " + token}}
	badBearer = http.Header{"Authorization": {"Bearer not-" + token}}
)

func withCookie(value string) http.Header {
	return http.Header{"Cookie": {CookieName + "=" + value}}
}

func TestAuth(t *testing.T) {
	session := newAuth([]string{token}).keys[0].session
	dashboard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dashboard at " + r.URL.Path)) })
	for _, tc := range []struct {
		name      string
		tok       string
		public    bool
		dashboard http.Handler
		path      string
		header    http.Header
		code      int
		body      string // a part of the body, or the Location of a redirect
	}{
		{name: "a browser without auth goes to the login page", tok: token, path: "/", header: page, code: http.StatusSeeOther, body: "/login"},
		{name: "a client without auth gets 401", tok: token, path: "/", code: http.StatusUnauthorized, body: "Bearer"},
		{name: "metrics without auth", tok: token, path: "/metrics", code: http.StatusUnauthorized},
		{name: "an API path from a browser without auth", tok: token, path: "/api/thing", header: page, code: http.StatusUnauthorized},
		{name: "the bearer token", tok: token, path: "/", header: bearer, code: http.StatusOK, body: "no dashboard built in"},
		{name: "a wrong bearer token", tok: token, path: "/", header: badBearer, code: http.StatusUnauthorized},
		{name: "the session cookie", tok: token, path: "/", header: withCookie(session), code: http.StatusOK, body: "no dashboard built in"},
		{name: "a wrong session cookie", tok: token, path: "/", header: withCookie(session[1:] + "0"), code: http.StatusUnauthorized},
		{name: "the token as the cookie", tok: token, path: "/", header: withCookie(token), code: http.StatusUnauthorized},
		{name: "metrics with the bearer token", tok: token, path: "/metrics", header: bearer, code: http.StatusOK, body: "rbs_test_things_total 3"},
		{name: "metrics with --metrics-public", tok: token, public: true, path: "/metrics", code: http.StatusOK, body: "rbs_test_things_total 3"},
		{name: "the API with the cookie", tok: token, path: "/api/thing", header: withCookie(session), code: http.StatusOK, body: `{"thing":1}`},
		{name: "the login page needs no auth", tok: token, path: "/login", code: http.StatusOK, body: `<form method="post" action="/login">`},
		{name: "an unknown path without a dashboard", tok: token, path: "/jobs", header: bearer, code: http.StatusNotFound},
		{name: "an unknown path without auth", tok: token, path: "/jobs", code: http.StatusUnauthorized},
		{name: "profiles without auth", tok: token, public: true, path: "/debug/pprof/goroutine?debug=1", code: http.StatusUnauthorized},
		{name: "profiles with the bearer token", tok: token, dashboard: dashboard, path: "/debug/pprof/goroutine?debug=1", header: bearer, code: http.StatusOK, body: "goroutine profile:"},
		{name: "the dashboard gets the other paths", tok: token, dashboard: dashboard, path: "/jobs/7", header: bearer, code: http.StatusOK, body: "dashboard at /jobs/7"},
		{name: "the dashboard behind auth", tok: token, dashboard: dashboard, path: "/jobs/7", header: page, code: http.StatusSeeOther, body: "/login"},
		{name: "routes before the dashboard", tok: token, dashboard: dashboard, path: "/api/thing", header: bearer, code: http.StatusOK, body: `{"thing":1}`},
		{name: "no token: no auth for pages", path: "/", code: http.StatusOK, body: "no dashboard built in"},
		{name: "no token: no auth for metrics", path: "/metrics", code: http.StatusOK, body: "rbs_test_things_total 3"},
		{name: "no token: the API", path: "/api/thing", code: http.StatusOK, body: `{"thing":1}`},
		{name: "no token: no login", path: "/login", header: page, code: http.StatusSeeOther, body: "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := get(handler(t, tc.tok, tc.public, tc.dashboard), tc.path, tc.header)
			if w.Code != tc.code {
				t.Fatalf("GET %s: %d, want %d; body:\n%s", tc.path, w.Code, tc.code, w.Body)
			}
			got := w.Body.String()
			if w.Code == http.StatusSeeOther {
				got = w.Header().Get("Location")
			}
			if (w.Code == http.StatusSeeOther && got != tc.body) || !strings.Contains(got, tc.body) {
				t.Fatalf("GET %s: %q, want %q in it", tc.path, got, tc.body)
			}
			if w.Code == http.StatusUnauthorized && strings.Contains(got, token) {
				t.Fatalf("GET %s: the 401 names the token: %q", tc.path, got)
			}
		})
	}
}

func postLogin(h http.Handler, tok string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Logging in with the token sets a cookie that is not the token and lets
// the browser in; a wrong token shows the form again with 401.
func TestLogin(t *testing.T) {
	h := handler(t, token, false, nil)
	for _, wrong := range []string{"", "wrong", token + "x"} {
		w := postLogin(h, wrong)
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "That token is wrong") || !strings.Contains(w.Body.String(), "<form") {
			t.Fatalf("POST /login with %q: %d\n%s", wrong, w.Code, w.Body)
		}
		if len(w.Result().Cookies()) != 0 {
			t.Fatalf("POST /login with %q set a cookie", wrong)
		}
	}
	w := postLogin(h, token)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		t.Fatalf("POST /login with the token: %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("POST /login set %d cookies, want 1", len(cookies))
	}
	c := cookies[0]
	if c.Name != CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v: want %s, HttpOnly, SameSite=Strict, Path=/", c, CookieName)
	}
	if strings.Contains(c.Value, token) {
		t.Fatalf("the cookie %q holds the token", c.Value)
	}
	if w := get(h, "/", page); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / without the cookie: %d, want a redirect", w.Code)
	}
	if w := get(h, "/", withCookie(c.Value)); w.Code != http.StatusOK {
		t.Fatalf("GET / with the login's cookie: %d\n%s", w.Code, w.Body)
	}
	if other := newAuth([]string{"yet another token"}).keys[0].session; other == c.Value {
		t.Fatal("two tokens give the same cookie")
	}
}

func TestRoutesOutsideAPIPanic(t *testing.T) {
	for _, pattern := range []string{"/jobs", "GET /metrics", "GET /apix/jobs"} {
		t.Run(pattern, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("New took the route %q", pattern)
				}
			}()
			New(Config{Routes: map[string]http.Handler{pattern: http.NotFoundHandler()}})
		})
	}
}
