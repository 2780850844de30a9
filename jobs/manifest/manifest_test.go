package manifest

import (
	"strings"
	"testing"
)

func TestDecodeAndSpec(t *testing.T) {
	good := `{"version": 1, "label": "//app:train", "name": "train", "command": ["app/trainer", "--epochs", "3"],
		"input_root": "` + strings.Repeat("a", 64) + `/78", "cpus": 2, "memory_bytes": 1024, "gpus": 0, "nodes": 1,
		"max_retries": 2, "checkpoint_dir": "ckpt", "outputs": ["out"], "platform": "linux-arm64"}`
	m, err := Decode([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Spec()
	if err != nil || s.Cpus != 2 || s.MaxRetries != 2 || s.CheckpointDir != "ckpt" || s.InputRoot != m.InputRoot || len(s.Outputs) != 1 || s.Platform != "linux-arm64" {
		t.Fatalf("Spec = %v, %v", s, err)
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Decode(b); err != nil || again.InputRoot != m.InputRoot {
		t.Fatalf("an encoded manifest reads back as %+v, %v", again, err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"version": 1`, `"version": 2`, "has version 2"},
		{`"cpus": 2`, `"cpus": 0`, "cpus 0"},
		{`"nodes": 1`, `"nodes": 0`, "nodes 0"},
		{`"max_retries": 2`, `"max_retries": 101`, "max_retries 101"},
		{`"checkpoint_dir": "ckpt"`, `"checkpoint_dir": "../ckpt"`, `contains ".."`},
		{`"outputs": ["out"]`, `"outputs": ["/out"]`, "is absolute"},
		{`"gpus": 0`, `"gpus": 0, "extra": 1`, `unknown field "extra"`},
		{`/78"`, `/x"`, "input root"},
		{`"linux-arm64"`, `"linux-vax"`, `platform "linux-vax": unknown architecture`},
	} {
		bad := strings.Replace(good, tc.from, tc.to, 1)
		if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.to, err, tc.want)
		}
	}
	m.Nodes = 2
	if _, err := m.Spec(); err == nil || !strings.Contains(err.Error(), "multi-node") {
		t.Fatalf("a 2-node manifest: %v", err)
	}
}
