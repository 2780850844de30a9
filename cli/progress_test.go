package cli

import (
	"bytes"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the bar's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Finish returns whether the transfer reached its total, fell short of it
// or failed; a nil bar (stderr not a terminal) does nothing.
func TestTransferBarFinishes(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  []int64
		ok   bool
	}{
		{"complete", []int64{1 << 20, 1 << 20}, true},
		{"short", []int64{1 << 20}, true},
		{"failed", []int64{1 << 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			b := newTransferBar(&out, "inputs", 2<<20)
			for _, n := range tc.add {
				b.Add(n)
			}
			b.Finish(tc.ok) // returns, rather than waiting for bytes that never come
		})
	}
	var none *transferBar
	none.Add(5)
	none.Finish(true)
	if b := startTransferBar("inputs", 0); b != nil {
		t.Error("a bar for nothing to send")
	}
}
