package runner

import (
	"os"

	"github.com/rbs-build/rbs/proto/workerpb"
)

// stdinQueue bounds the JobStdin messages queued for one attempt: the
// server has at most 1 MiB of it unacknowledged, in chunks of up to 64 KiB,
// so a full queue means a server that broke the protocol.
const stdinQueue = 64

// jobStdin feeds the stdin pipe of an interactive attempt from the
// server's JobStdin messages: by offset, so that each byte is written once
// and in order; a message past a gap, eof, or a job that no longer reads
// closes the pipe. Every message is acknowledged, so that the server sends
// more.
type jobStdin struct {
	task string
	msgs chan *workerpb.JobStdin
	done chan struct{} // closed when the attempt has ended
	fed  chan struct{} // closed when feed has returned
	pipe *os.File      // the write end, set once the attempt has one
}

// QueueStdin makes the stdin of an interactive attempt take messages,
// before the attempt runs, unless it already does (an assignment repeated
// after a reconnect).
func (rn *Runner) QueueStdin(task string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.stdins[task] == nil {
		rn.stdins[task] = &jobStdin{task: task, msgs: make(chan *workerpb.JobStdin, stdinQueue), done: make(chan struct{})}
	}
}

// openStdin returns the read end of the attempt's stdin pipe, for the job,
// and starts feeding the write end.
func (rn *Runner) openStdin(task string) (*os.File, error) {
	rn.mu.Lock()
	in := rn.stdins[task]
	rn.mu.Unlock()
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	in.pipe = pw
	in.fed = make(chan struct{})
	go in.feed(rn.cfg.Outbox)
	return r, nil
}

// endStdin stops the attempt's stdin once the attempt has ended, and waits
// for what was queued before to be acknowledged.
func (rn *Runner) endStdin(task string) {
	rn.mu.Lock()
	in := rn.stdins[task]
	delete(rn.stdins, task)
	rn.mu.Unlock()
	close(in.done)
	if in.pipe != nil {
		in.pipe.Close() // wakes a write the job will never read
		<-in.fed
	}
}

// Stdin queues a JobStdin for its attempt; one for an attempt the
// worker does not run is dropped.
func (rn *Runner) Stdin(m *workerpb.JobStdin) {
	rn.mu.Lock()
	in := rn.stdins[m.TaskId]
	rn.mu.Unlock()
	if in == nil {
		return
	}
	select {
	case in.msgs <- m:
	case <-in.done:
	default:
		rn.cfg.Log.Warn("the server sent more stdin than it may have unacknowledged; dropping it, which leaves a gap that closes the job's stdin", "task", m.TaskId)
	}
}

// feed writes the queued messages to the pipe until the attempt ends.
func (in *jobStdin) feed(outbox chan<- *workerpb.WorkerMessage) {
	defer close(in.fed)
	var next int64 // what the pipe has been given, or dropped once closed
	closed := false
	shut := func() {
		if !closed {
			closed = true
			in.pipe.Close()
		}
	}
	for {
		// Messages already queued, and their acknowledgements, go before
		// the end of the attempt.
		var m *workerpb.JobStdin
		select {
		case m = <-in.msgs:
		default:
			select {
			case m = <-in.msgs:
			case <-in.done:
				return
			}
		}
		end := m.Offset + int64(len(m.Data))
		switch {
		case closed:
		case m.Offset > next:
			shut() // a gap: what is missing will not come
		case end > next:
			if _, err := in.pipe.Write(m.Data[next-m.Offset:]); err != nil {
				shut() // the job closed its stdin, or ended
			}
		}
		if m.Eof {
			shut()
		}
		next = max(next, end)
		ack := &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_JobStdinAck{JobStdinAck: &workerpb.JobStdinAck{TaskId: in.task, Offset: next}}}
		select {
		case outbox <- ack:
		default:
			select {
			case outbox <- ack:
			case <-in.done:
				return
			}
		}
	}
}
