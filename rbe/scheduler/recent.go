package scheduler

import (
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// recentActions is how many ended actions Recent keeps.
const recentActions = 200

// recent is a ring of the latest ended actions.
type recent struct {
	ring []*workerpb.ActionRecord
	next int
}

func (r *recent) add(a *workerpb.ActionRecord) {
	if len(r.ring) < recentActions {
		r.ring = append(r.ring, a)
		return
	}
	r.ring[r.next] = a
	r.next = (r.next + 1) % recentActions
}

// latest returns the kept actions, the latest first.
func (r *recent) latest() []*workerpb.ActionRecord {
	out := make([]*workerpb.ActionRecord, 0, len(r.ring))
	for i := range r.ring {
		out = append(out, r.ring[(r.next-1-i+2*len(r.ring))%len(r.ring)])
	}
	return out
}

// Recent returns the latest ended actions, the latest first: those run and
// those Execute answered from the action cache.
func (s *Scheduler) Recent() []*workerpb.ActionRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recent.latest()
}

// span is the milliseconds from a to b, 0 when either is unset.
func span(a, b *timestamppb.Timestamp) float64 {
	if a == nil || b == nil {
		return 0
	}
	return float64(b.AsTime().Sub(a.AsTime())) / float64(time.Millisecond)
}

// actionRecord describes task t, which ended with resp at now.
func actionRecord(t *task, worker string, resp *repb.ExecuteResponse, now time.Time) *workerpb.ActionRecord {
	a := &workerpb.ActionRecord{
		Digest: t.action.Digest.String(), Worker: worker, CompletedUnixMs: now.UnixMilli(),
		TotalMs: float64(now.Sub(t.received)) / float64(time.Millisecond),
	}
	if st := resp.GetStatus(); st.GetCode() != 0 {
		a.Error = st.GetMessage()
	}
	if res := resp.GetResult(); res != nil {
		a.ExitCode = res.ExitCode
		m := res.ExecutionMetadata
		if m.GetWorkerStartTimestamp() != nil {
			a.QueuedMs = float64(m.WorkerStartTimestamp.AsTime().Sub(t.received)) / float64(time.Millisecond)
		}
		a.FetchMs = span(m.GetInputFetchStartTimestamp(), m.GetInputFetchCompletedTimestamp())
		a.RunMs = span(m.GetExecutionStartTimestamp(), m.GetExecutionCompletedTimestamp())
		a.UploadMs = span(m.GetOutputUploadStartTimestamp(), m.GetOutputUploadCompletedTimestamp())
	}
	return a
}

// cacheHitRecord describes an action Execute answered from the cache.
func cacheHitRecord(d digest.Digest, res *repb.ActionResult, now time.Time) *workerpb.ActionRecord {
	return &workerpb.ActionRecord{Digest: d.String(), CacheHit: true, ExitCode: res.GetExitCode(), CompletedUnixMs: now.UnixMilli(), Worker: res.GetExecutionMetadata().GetWorker()}
}
