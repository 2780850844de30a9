package sched

import (
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// MaxStdin bounds the stdin the Core holds for one interactive job:
	// what has arrived and the worker has not yet said it is done with,
	// whether the job is still pending or runs. A client that sends more
	// waits (Stdin refuses the chunk) until the worker acknowledges some.
	MaxStdin = 1 << 20
	// MaxStdinChunk bounds one chunk of stdin a client sends.
	MaxStdinChunk = 64 << 10
	// AttachWait is how long an interactive attempt runs without a client
	// attached before its stdin is closed: the client that submitted it
	// went away before attaching, or the server restarted.
	AttachWait = time.Minute
)

// stdin is the stdin of an interactive job, which lives only in memory: it
// goes to one attempt, the first to start, in order, each byte at most
// once. Later attempts (a retry, a requeue after a lost worker) start with
// their stdin closed, as do attempts whose stdin the server lost (it
// restarted, or reloaded its state after a failed commit), and attempts
// that run for AttachWait with no client attached. What the
// worker has not acknowledged is kept and sent again after the worker
// reconnects; the worker writes each byte once, by offset.
type stdin struct {
	task     string // the attempt it goes to; "" until one starts
	base     int64  // offset of held[0]: what the worker is done with
	held     []byte // the rest of what arrived
	sent     int64  // offset up to which held has been sent
	eof      bool   // the client closed it (or went away)
	eofSent  bool
	attached bool
}

// Attach connects a client to the stdin of interactive job k. Only one
// client at a time may be attached, and only to a job that has not ended.
func (c *Core) Attach(k Key) error {
	j := c.jobs[k]
	switch {
	case j == nil:
		return status.Errorf(codes.NotFound, "job %s not found", k)
	case !j.spec.Interactive:
		return status.Errorf(codes.FailedPrecondition, "job %s was not submitted with --interactive: it has no stdin to attach to; follow its output with rbs job logs -f %s", k, k)
	case j.state().Terminal():
		return status.Errorf(codes.FailedPrecondition, "job %s has ended (%s); see its output with rbs job logs %s", k, j.state(), k)
	}
	st := c.stdinOf(j)
	if st == nil {
		return status.Errorf(codes.FailedPrecondition, "job %s lost its stdin (the server restarted while it ran): it reads end of file", k)
	}
	if st.attached {
		return status.Errorf(codes.FailedPrecondition, "job %s already has a client attached to its stdin", k)
	}
	if st.eof {
		return status.Errorf(codes.FailedPrecondition, "job %s's stdin is already closed", k)
	}
	st.attached = true
	return nil
}

// stdinOf returns the stdin of interactive job j, made for one that has
// not started; nil when a running attempt has none (the server lost it).
func (c *Core) stdinOf(j *job) *stdin {
	st := c.stdins[j.key]
	if st == nil && j.state() == Pending {
		st = &stdin{}
		c.stdins[j.key] = st
	}
	return st
}

// Stdin takes a chunk of the stdin of job k, and eof once the client has
// closed it. It reports false, taking nothing, when the chunk does not fit
// in MaxStdin: the caller tries again after the worker has acknowledged
// more. Stdin of a job that has ended, or has no stdin any more, is
// dropped.
func (c *Core) Stdin(k Key, data []byte, eof bool) bool {
	j := c.jobs[k]
	if j == nil || j.state().Terminal() {
		return true
	}
	st := c.stdinOf(j)
	if st == nil || st.eof {
		return true
	}
	if len(st.held)+len(data) > MaxStdin {
		return false
	}
	st.held = append(st.held, data...)
	st.eof = eof
	c.pushStdin(j, st)
	return true
}

// Detach records that the client attached to job k went away: its stdin
// is closed.
func (c *Core) Detach(k Key) {
	if st := c.stdins[k]; st != nil && st.attached {
		st.attached = false
		if j := c.jobs[k]; j != nil && !st.eof {
			st.eof = true
			c.pushStdin(j, st)
		}
	}
}

// StdinAck records that the worker running an attempt is done with its
// stdin up to offset.
func (c *Core) StdinAck(workerName, task string, offset int64) {
	j, _ := c.attempt(workerName, task)
	if j == nil {
		return
	}
	st := c.stdins[j.key]
	if st == nil || st.task != task || offset <= st.base || offset > st.sent {
		return
	}
	st.held = st.held[offset-st.base:]
	st.base = offset
	if len(st.held) == 0 {
		st.held = nil // let the backing array go
	}
}

// startStdin gives the attempt of j that has just been assigned its stdin:
// what is held, for the first attempt; a closed one otherwise.
func (c *Core) startStdin(j *job, w *worker) {
	st := c.stdins[j.key]
	if st == nil && j.rec.Attempts == 1 {
		st = &stdin{}
		c.stdins[j.key] = st
	}
	if st == nil || st.task != "" {
		c.send(w, stdinMsg(j.task, 0, nil, true))
		return
	}
	st.task = j.task
	c.pushStdin(j, st)
}

// resendStdin sends again, after worker w reconnected, the stdin of its
// interactive attempts that it has not acknowledged; attempts whose stdin
// the server lost get it closed.
func (c *Core) resendStdin(w *worker) {
	for _, j := range w.running {
		if !j.spec.Interactive {
			continue
		}
		st := c.stdins[j.key]
		if st == nil || st.task != j.task {
			c.send(w, stdinMsg(j.task, 0, nil, true))
			continue
		}
		st.sent, st.eofSent = st.base, false
		c.pushStdin(j, st)
	}
}

// closeUnattached closes the stdin of attempts that have run for
// AttachWait with no client attached.
func (c *Core) closeUnattached(now time.Time) {
	for k, st := range c.stdins {
		j := c.jobs[k]
		if st.task != "" && !st.attached && !st.eof && now.Sub(time.UnixMilli(j.rec.StartUnixMs)) >= AttachWait {
			st.eof = true
			c.pushStdin(j, st)
		}
	}
}

// pushStdin sends what the running attempt of j has not been sent of st.
func (c *Core) pushStdin(j *job, st *stdin) {
	w := c.workers[j.rec.Worker]
	if st.task == "" || st.task != j.task || j.state() != Running || w == nil || !w.connected {
		return
	}
	for end := st.base + int64(len(st.held)); st.sent < end || st.eof && !st.eofSent; {
		n := min(end-st.sent, MaxStdinChunk)
		data := st.held[st.sent-st.base : st.sent-st.base+n]
		last := st.sent+n == end && st.eof
		c.send(w, stdinMsg(st.task, st.sent, data, last))
		st.sent += n
		st.eofSent = last
	}
}

func stdinMsg(task string, offset int64, data []byte, eof bool) *workerpb.ServerMessage {
	return &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_JobStdin{JobStdin: &workerpb.JobStdin{
		TaskId: task, Offset: offset, Data: data, Eof: eof,
	}}}
}
