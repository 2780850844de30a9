package service

import (
	"testing"

	"github.com/rbs-build/rbs/jobs/store"
)

func TestRanks(t *testing.T) {
	chunks := []store.LogChunk{
		{Rank: 0, Data: []byte("a\nb")},
		{Rank: 1, Data: []byte("x\n")},
		{Rank: -1, Data: []byte("[rbs] attempt 2\n")},
		{Rank: 0, Data: []byte("c\nd")},
		{Rank: 1, Data: []byte("y")},
	}
	for _, tc := range []struct {
		name string
		r    *ranks
		want string
	}{
		{"interleaved", &ranks{interleave: true, partial: map[int32][]byte{}},
			"[rank 0] a\n[rank 1] x\n[rbs] attempt 2\n[rank 0] bc\n[rank 0] d\n[rank 1] y\n"},
		{"rank 0", &ranks{rank: 0}, "a\nb[rbs] attempt 2\nc\nd"},
		{"rank 1", &ranks{rank: 1}, "x\n[rbs] attempt 2\ny"},
	} {
		var got []byte
		for _, c := range chunks {
			got = append(got, tc.r.add(c)...)
		}
		got = append(got, tc.r.flush()...)
		if string(got) != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
