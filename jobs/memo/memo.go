// Package memo provides the keys of the job cache, which remembers jobs by
// their content as an action cache remembers actions: a job's key is the
// digest of everything that decides its result, so that a job submitted
// again unchanged can be answered with the result of the one that ran.
//
// A key is made in two steps. Spec digests what the job's spec decides,
// at the server's edge when the job is submitted; Task adds what only the
// scheduler knows once the task may start: its array index or sweep
// values, and the outputs of the jobs it runs after.
package memo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// Attempt reports whether an environment variable is left out of keys:
// those rbs sets for each attempt and the ones that reach the server
// (RBS_*), and Slurm's (SLURM_*), which name an attempt, not its content.
func Attempt(name string) bool {
	return strings.HasPrefix(name, "RBS_") || strings.HasPrefix(name, "SLURM_")
}

// Spec returns the key of what s decides of a job's result: its command or
// script and arguments, its environment (less the Attempt variables), its
// input root, platform, container image, node count, declared outputs and
// checkpoint directory, and version, the user's cache version. A sweep's
// parameters are not: each task's own values are part of its key (Task),
// so that a sweep grown by a value shares the entries of the tasks it had. Resources, time limits, the queue and the priority are
// not part of it: they decide where and when the job runs, not what it
// computes. A gang's node count is, as its ranks see it.
func Spec(s *jobspb.JobSpec, version string) string {
	w := newWriter("rbs job spec v1")
	w.strings(s.Command)
	w.str(s.Script)
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		if !Attempt(k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	w.count(len(names))
	for _, k := range names {
		w.str(k)
		w.str(s.Env[k])
	}
	w.str(s.InputRoot)
	w.str(s.Platform)
	w.str(s.Container)
	w.count(int(max(s.Nodes, 1)))
	w.strings(s.Outputs)
	w.str(s.CheckpointDir)
	w.str(version)
	return w.sum()
}

// Scoped returns key for the entries of one user alone: where users hold
// tokens of their own, one user's job is answered only with results that
// jobs of the same user made.
func Scoped(key, user string) string {
	w := newWriter("rbs job scope v1")
	w.str(key)
	w.str(user)
	return w.sum()
}

// Task returns the key of one task of a job whose spec's key is spec: a
// sweep task's values (not its index, which moves when the sweep grows),
// else an array task's index (-1 for a plain job), and the output roots of
// the jobs it runs after, in the order of its dependencies.
func Task(spec string, index int32, sweep []string, upstream []string) string {
	w := newWriter("rbs job task v1")
	w.str(spec)
	if len(sweep) > 0 {
		index = -1
	}
	w.count(int(index) + 1)
	w.strings(sweep)
	w.strings(upstream)
	return w.sum()
}

// writer feeds a hash with length-prefixed fields, so that no two
// different sequences of fields write the same bytes.
type writer struct{ h hash.Hash }

func newWriter(domain string) *writer {
	w := &writer{sha256.New()}
	w.str(domain)
	return w
}

func (w *writer) count(n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	w.h.Write(b[:])
}

func (w *writer) str(s string) {
	w.count(len(s))
	w.h.Write([]byte(s))
}

func (w *writer) strings(ss []string) {
	w.count(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

func (w *writer) sum() string { return hex.EncodeToString(w.h.Sum(nil)) }
