package tests

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

type retryView struct {
	State          string `json:"state"`
	Attempts       int    `json:"attempts"`
	MaxRetries     int    `json:"max_retries"`
	CheckpointDir  string `json:"checkpoint_dir"`
	CheckpointRoot string `json:"checkpoint_root"`
	History        []struct {
		Attempt  int    `json:"attempt"`
		Worker   string `json:"worker"`
		State    string `json:"state"`
		ExitCode int    `json:"exit_code"`
	} `json:"history"`
}

// TestJobRetriesResumeFromCheckpoints runs jobs with --max-retries through
// the CLI: a failed attempt runs again, with the checkpoint directory the
// last one left restored, until an attempt completes or the retries are
// used up; show lists every attempt and the logs hold them all.
func TestJobRetriesResumeFromCheckpoints(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	for _, tc := range []struct {
		name    string
		flags   []string
		script  string
		state   string
		history string   // ATTEMPT:STATE:EXIT of each attempt
		logs    []string // in order in the logs
	}{
		{
			"resumes from its checkpoint", []string{"--max-retries", "2", "--checkpoint-dir", "ckpt"},
			`if [ "$RBS_ATTEMPT" = 1 ]; then mkdir ckpt && echo 5 > ckpt/step && echo wrote 5; exit 1; fi; echo "read $(cat ckpt/step)"`,
			"COMPLETED", "1:FAILED:1 2:COMPLETED:0",
			[]string{"wrote 5\n", "[rbs] attempt 1 failed (FAILED); retrying (1 of 2)\n", "[rbs] attempt 2 on worker w1\n", "read 5\n"},
		},
		{
			"retries used up", []string{"--max-retries", "1"},
			`echo attempt $RBS_ATTEMPT; exit 3`,
			"FAILED", "1:FAILED:3 2:FAILED:3",
			[]string{"attempt 1\n", "retrying (1 of 1)", "attempt 2\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, srv, append(tc.flags, "--", "sh", "-c", tc.script)...)
			// wait exits non-zero unless the job COMPLETED: the state is
			// checked below.
			rbsRun(srv, "job", "wait", id)
			var v retryView
			if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &v); err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, a := range v.History {
				hs = append(hs, fmt.Sprintf("%d:%s:%d", a.Attempt, a.State, a.ExitCode))
			}
			if v.State != tc.state || v.Attempts != len(v.History) || strings.Join(hs, " ") != tc.history {
				t.Fatalf("%s after %d attempts, history %q; want %s, %q", v.State, v.Attempts, hs, tc.state, tc.history)
			}
			if (v.CheckpointDir != "") != (v.CheckpointRoot != "") {
				t.Fatalf("checkpoint dir %q, root %q", v.CheckpointDir, v.CheckpointRoot)
			}
			logs := rbs(t, srv, "job", "logs", id)
			at := 0
			for _, want := range tc.logs {
				i := strings.Index(logs[at:], want)
				if i < 0 {
					t.Fatalf("logs lack %q after byte %d:\n%s", want, at, logs)
				}
				at += i + len(want)
			}
			text := rbs(t, srv, "job", "show", id)
			if rows := strings.Count(text, "\nAttempt: "); rows != len(v.History) {
				t.Fatalf("show has %d Attempt rows, want %d:\n%s", rows, len(v.History), text)
			}
			if v.CheckpointRoot != "" && !regexp.MustCompile(`\nCheckpoint: +ckpt \(`+regexp.QuoteMeta(v.CheckpointRoot)+`\)\n`).MatchString(text) {
				t.Fatalf("show lacks the checkpoint:\n%s", text)
			}
		})
	}
	// The flags are checked before anything is sent.
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--checkpoint-dir", "../up"}, `invalid --checkpoint-dir: path "../up" contains ".."`},
		{[]string{"--checkpoint-dir", "/abs"}, `invalid --checkpoint-dir: path "/abs" is absolute`},
		{[]string{"--max-retries", "101"}, "invalid --max-retries: 101: want 0 to 100"},
	} {
		_, stderr, err := rbsRun(srv, append(append([]string{"job", "submit"}, tc.flags...), "--", "true")...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("submit %q: %v, %q; want an error with %q", tc.flags, err, stderr, tc.want)
		}
	}
}
