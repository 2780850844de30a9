package runner

import (
	"fmt"
	"math"
	"os"
	"sync"
)

// jobOutput is what a job attempt writes, kept in a file within the cap
// the server gave, so that what a broken stream lost can be sent again:
// the first half of the cap as it is written (the head), then, in a ring,
// the last half (the tail), sent once the attempt has ended. What falls
// between is dropped. Offsets count everything the attempt wrote.
type jobOutput struct {
	path       string
	head, tail int64 // the most each part holds; the file is head, then the ring

	mu sync.Mutex
	// f is made at the first write: most jobs of an array write nothing,
	// and making and removing a file for each was a tenth of the worker's
	// samples in a profile of a 1,000-task array.
	// It is nil before, and once closed; reads then open path.
	f      *os.File
	closed bool
	size   int64 // how much the attempt wrote
	ended  bool
}

// newJobOutput returns the output of an attempt, kept under a cap (0 for
// none) in a file at path, readable by the worker only, once it writes.
func newJobOutput(path string, limit int64) *jobOutput {
	o := &jobOutput{path: path, head: math.MaxInt64}
	if limit > 0 {
		o.head, o.tail = limit/2, limit-limit/2
	}
	return o
}

// write keeps p, the next bytes the attempt wrote.
func (o *jobOutput) write(p []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		if o.closed {
			return fmt.Errorf("writing to the closed output %s", o.path)
		}
		f, err := os.OpenFile(o.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		o.f = f
	}
	for len(p) > 0 {
		n := int64(len(p))
		at := o.size
		if o.size >= o.head {
			if n > o.tail {
				// Only the last tail bytes of p can stay.
				o.size += n - o.tail
				p, n = p[n-o.tail:], o.tail
			}
			pos := (o.size - o.head) % o.tail
			at, n = o.head+pos, min(n, o.tail-pos)
		} else {
			n = min(n, o.head-o.size)
		}
		if _, err := o.f.WriteAt(p[:n], at); err != nil {
			return err
		}
		o.size += n
		p = p[n:]
	}
	return nil
}

// end records that the attempt has written everything, which makes the
// tail ready to send, and returns how much it wrote.
func (o *jobOutput) end() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	return o.size
}

// close closes the file; the output can still be read.
func (o *jobOutput) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f != nil {
		o.f.Close()
		o.f = nil
	}
	o.closed = true
}

// read returns up to limit bytes to send from offset off on: part of the
// head, or, once the attempt has ended, of the tail. at is where data
// starts, after skipped bytes from off that are never sent. No data means
// there is nothing to send from off, or not yet.
func (o *jobOutput) read(off int64, limit int) (data []byte, at, skipped int64, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var end int64
	switch headEnd := min(o.size, o.head); {
	case off < headEnd:
		at, end = off, headEnd
	case o.ended && off < o.size:
		at, end = max(off, o.size-o.tail), o.size
	default:
		return nil, off, 0, nil
	}
	data = make([]byte, min(end-at, int64(limit)))
	f := o.f
	if f == nil {
		if f, err = os.Open(o.path); err != nil {
			return nil, off, 0, err
		}
		defer f.Close()
	}
	if at < o.head {
		_, err = f.ReadAt(data, at)
	} else {
		pos := (at - o.head) % o.tail
		first := min(int64(len(data)), o.tail-pos)
		if _, err = f.ReadAt(data[:first], o.head+pos); err == nil && first < int64(len(data)) {
			_, err = f.ReadAt(data[first:], o.head)
		}
	}
	if err != nil {
		return nil, off, 0, err
	}
	return data, at, at - off, nil
}
