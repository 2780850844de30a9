package spec

import (
	"maps"
	"testing"
)

func TestExportEnv(t *testing.T) {
	environ := []string{
		"PATH=/opt/bin:/usr/bin", "DATA=/data", "HOME=/home/ann", "TMPDIR=/tmp/ann",
		"RBS_REMOTE=host:8980", "RBS_REMOTE_TOKEN=secret", "RBS_JOB_ID=7", "RBS_ARRAY_INDEX=3",
		"CUDA_VISIBLE_DEVICES=0", "SSH_AUTH_SOCK=/run/a", "XDG_CACHE_HOME=/home/ann/.cache", "EMPTY=", "A=x=y", "malformed",
	}
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"ALL", map[string]string{"PATH": "/opt/bin:/usr/bin", "DATA": "/data", "RBS_REMOTE": "host:8980", "EMPTY": "", "A": "x=y"}},
		{" ALL ", map[string]string{"PATH": "/opt/bin:/usr/bin", "DATA": "/data", "RBS_REMOTE": "host:8980", "EMPTY": "", "A": "x=y"}},
		{"NONE", map[string]string{}},
		{"DATA", map[string]string{"DATA": "/data"}},
		{"DATA,HOME,MISSING", map[string]string{"DATA": "/data", "HOME": "/home/ann"}},
		{"DEBUG=1,DATA", map[string]string{"DEBUG": "1", "DATA": "/data"}},
		{"DATA=/other", map[string]string{"DATA": "/other"}},
		{"ALL,DEBUG=1,HOME", map[string]string{"PATH": "/opt/bin:/usr/bin", "DATA": "/data", "RBS_REMOTE": "host:8980", "EMPTY": "", "A": "x=y", "DEBUG": "1", "HOME": "/home/ann"}},
		{"_x9=", map[string]string{"_x9": ""}},
	} {
		e, err := ParseExport(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := e.Env(environ); !maps.Equal(got, tc.want) {
			t.Errorf("%q: env %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseExportRejects(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{"  ", "empty"},
		{"DATA,", "empty variable name"},
		{",DATA", "empty variable name"},
		{"NONE,DATA", "NONE cannot be combined"},
		{"DATA,ALL", "ALL cannot be combined"},
		{"9LIVES", `"9LIVES"`},
		{"MY-VAR", `"MY-VAR"`},
		{"=1", "empty variable name"},
		{"A B", `"A B"`},
	} {
		_, err := ParseExport(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}

func TestParseEnvVar(t *testing.T) {
	for _, tc := range []struct{ in, k, v string }{
		{"A=1", "A", "1"},
		{"LIST=a,b,c", "LIST", "a,b,c"},
		{"EQ=x=y", "EQ", "x=y"},
		{"EMPTY=", "EMPTY", ""},
		{"_=x", "_", "x"},
	} {
		k, v, err := ParseEnvVar(tc.in)
		if err != nil || k != tc.k || v != tc.v {
			t.Errorf("%q: %q %q %v, want %q %q", tc.in, k, v, err, tc.k, tc.v)
		}
	}
	for _, tc := range []struct{ in, reason string }{
		{"NOEQUALS", "want KEY=VALUE"},
		{"=1", "empty variable name"},
		{"1A=x", `"1A"`},
		{"A B=x", `"A B"`},
		{"A.B=x", `"A.B"`},
	} {
		_, _, err := ParseEnvVar(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}
