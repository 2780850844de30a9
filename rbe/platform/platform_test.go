package platform

import (
	"runtime"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "linux-x86_64", want: "linux-x86_64"},
		{in: "linux-amd64", want: "linux-x86_64"},
		{in: "Linux-AArch64", want: "linux-arm64"},
		{in: " linux-arm64 ", want: "linux-arm64"},
		{in: "darwin-arm64", want: "darwin-arm64"},
		{in: "linux", err: `platform "linux": no '-'`},
		{in: "plan9-x86_64", err: `unknown OS "plan9"`},
		{in: "linux-sparc", err: `unknown architecture "sparc"`},
		{in: "", err: `platform "": no '-'`},
	} {
		p, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error containing %q", tc.in, p, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}

func TestProperties(t *testing.T) {
	for _, tc := range []struct{ name, os, isa string }{
		{"linux-x86_64", "linux", "x86-64"},
		{"linux-arm64", "linux", "arm-a64"},
		{"windows-x86_32", "windows", "x86-32"},
	} {
		p, err := Parse(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		props := p.Properties()
		if props[OSFamily] != tc.os || props[ISA] != tc.isa {
			t.Errorf("%s: properties %v", tc.name, props)
		}
		back, ok := FromProperties(props)
		if !ok || back != p {
			t.Errorf("%s: FromProperties(%v) = %v, %v", tc.name, props, back, ok)
		}
	}
	if _, ok := FromProperties(map[string]string{OSFamily: "linux"}); ok {
		t.Error("FromProperties without an ISA gave a platform")
	}
	if _, ok := FromProperties(map[string]string{ISA: "x86-64"}); ok {
		t.Error("FromProperties without an OSFamily gave a platform")
	}
}

func TestHostAndEnv(t *testing.T) {
	h := Host()
	if h.OS != runtime.GOOS || h.IsZero() {
		t.Fatalf("Host() = %v", h)
	}
	if back, err := Parse(h.String()); runtime.GOARCH == "amd64" && (err != nil || back != h) {
		t.Fatalf("Parse(Host()) = %v, %v", back, err)
	}
	t.Setenv(EnvVar, "")
	if p, err := FromEnv(); err != nil || p != h {
		t.Fatalf("FromEnv() unset = %v, %v; want the host's", p, err)
	}
	t.Setenv(EnvVar, "linux-arm64")
	if p, err := FromEnv(); err != nil || p.String() != "linux-arm64" {
		t.Fatalf("FromEnv() = %v, %v", p, err)
	}
	t.Setenv(EnvVar, "linux-mips")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvVar) || !strings.Contains(err.Error(), "linux-mips") {
		t.Fatalf("FromEnv() with a bad value: %v", err)
	}
}
