// Package heapfloor keeps Go's garbage collector from running while a
// long-lived process's heap is small.
//
// With the default GOGC of 100 a heap of a few MiB is collected every few
// MiB allocated. A server answering FindMissingBlobs of 10,000 digests
// allocates about 2.5 MiB a call, so it collected every other call and
// spent a third of the call's time in the collector and in returning pages
// to the kernel. A floor lets the heap grow to a fixed size before the
// collector runs; past the floor the collector paces as GOGC=100 would.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Set has the collector leave the heap alone until it holds floor bytes,
// or twice its live bytes once that is more. It is tuned again after every
// collection. A GOGC set in the environment wins: Set then does nothing.
func Set(floor uint64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{{Name: liveBytes}}}
	t.tune()
	t.arm()
}

const liveBytes = "/gc/heap/live:bytes"

type tuner struct {
	floor   uint64
	sample  []metrics.Sample
	percent int
}

// arm has tune run after the next collection, and arm again: a finalizer
// runs once the collector has found its object unreachable.
func (t *tuner) arm() {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		t.tune()
		t.arm()
	})
}

// runtimeMinimum is the heap the runtime lets grow before its first
// collection at GOGC=100; it scales with GOGC.
const runtimeMinimum = 4 << 20

// tune sets GOGC for the live heap the last collection found.
func (t *tuner) tune() {
	metrics.Read(t.sample)
	if percent := percentFor(t.floor, t.sample[0].Value.Uint64()); percent != t.percent {
		t.percent = percent
		debug.SetGCPercent(percent)
	}
}

// percentFor is the GOGC that has the next collection come when the heap
// reaches floor, given live bytes, and 100 once they are half the floor or
// more. It goes no higher than makes the runtime's own minimum the floor,
// which also keeps it within GOGC's range.
func percentFor(floor, live uint64) int {
	live = max(live, 1)
	return max(int(min(floor*100/live, floor*100/runtimeMinimum+100))-100, 100)
}
