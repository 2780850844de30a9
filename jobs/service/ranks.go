package service

import (
	"bytes"
	"fmt"

	"github.com/rbs-build/rbs/jobs/store"
)

// ranks turns the stored output of a job into what a reader of it gets:
// for a job of one node, its output as written; for a multi-node job,
// either one rank's output as written, or every rank's lines interleaved
// in the order they were stored, each prefixed "[rank N] ". A line is given
// once it is whole, and at the end what is left of each rank's last line.
// Lines rbs adds about the job (rank -1) are given as they are.
type ranks struct {
	interleave bool
	rank       int32 // the one rank, when not interleaving
	partial    map[int32][]byte
	order      []int32 // ranks in the order their partial lines began
}

func (r *ranks) add(c store.LogChunk) []byte {
	if c.Rank < 0 {
		return c.Data // rbs's own lines about the job
	}
	if !r.interleave {
		if c.Rank != r.rank {
			return nil
		}
		return c.Data
	}
	var out []byte
	data := c.Data
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if _, ok := r.partial[c.Rank]; !ok {
				r.order = append(r.order, c.Rank)
			}
			r.partial[c.Rank] = append(r.partial[c.Rank], data...)
			break
		}
		out = append(out, r.line(c.Rank, data[:i+1])...)
		data = data[i+1:]
	}
	return out
}

// line is a whole line of rank's, with what was held of it.
func (r *ranks) line(rank int32, end []byte) []byte {
	out := fmt.Appendf(nil, "[rank %d] ", rank)
	if held, ok := r.partial[rank]; ok {
		out = append(out, held...)
		delete(r.partial, rank)
		for i, o := range r.order {
			if o == rank {
				r.order = append(r.order[:i], r.order[i+1:]...)
				break
			}
		}
	}
	return append(out, end...)
}

// flush gives what is left of each rank's last line, ended with a newline.
func (r *ranks) flush() []byte {
	var out []byte
	for len(r.order) > 0 {
		out = append(out, r.line(r.order[0], []byte("\n"))...)
	}
	return out
}
