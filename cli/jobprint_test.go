package cli

import (
	"strings"
	"testing"

	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
)

func TestJobTableGroupsPendingArrayTasks(t *testing.T) {
	task := func(id int64, index int32, state, reason string, prio int64, limit int32) *jobspb.JobInfo {
		name := "arr"
		if index < 0 {
			name = "one"
		}
		return &jobspb.JobInfo{
			Id:       spec.JobID{ID: id, Index: int(index)}.String(),
			Priority: &jobspb.Priority{Total: prio},
			Record: &jobspb.JobRecord{Id: id, Index: index, State: state, PendingReason: reason, Worker: map[bool]string{true: "w1"}[state == "RUNNING"],
				Spec: &jobspb.JobSpec{Name: name, Queue: "batch", Array: &jobspb.ArraySpec{Limit: limit}}},
		}
	}
	for _, tc := range []struct {
		name string
		jobs []*jobspb.JobInfo
		ids  []string
	}{
		{"a plain job", []*jobspb.JobInfo{task(1, -1, "PENDING", "Priority", 0, 0)}, []string{"1"}},
		{"running tasks stay apart, the pending ones share a line", []*jobspb.JobInfo{
			task(2, 0, "RUNNING", "", 0, 2), task(2, 1, "RUNNING", "", 0, 2),
			task(2, 2, "PENDING", "JobArrayTaskLimit", 0, 2), task(2, 3, "PENDING", "JobArrayTaskLimit", 0, 2), task(2, 5, "PENDING", "JobArrayTaskLimit", 0, 2),
		}, []string{"2_0", "2_1", "2_[2-3,5%2]"}},
		{"a different reason or priority starts a new line", []*jobspb.JobInfo{
			task(3, 0, "PENDING", "Resources", 5, 0), task(3, 1, "PENDING", "Priority", 5, 0), task(3, 2, "PENDING", "Priority", 5, 0),
			task(3, 3, "PENDING", "Priority", 6, 0),
		}, []string{"3_0", "3_[1-2]", "3_3"}},
		{"two arrays never share a line", []*jobspb.JobInfo{
			task(4, 0, "PENDING", "Priority", 0, 0), task(4, 1, "PENDING", "Priority", 0, 0), task(5, 0, "PENDING", "Priority", 0, 0),
		}, []string{"4_[0-1]", "5_0"}},
		{"evenly spaced indices", []*jobspb.JobInfo{
			task(6, 0, "PENDING", "Priority", 0, 0), task(6, 4, "PENDING", "Priority", 0, 0), task(6, 8, "PENDING", "Priority", 0, 0),
		}, []string{"6_[0-8:4]"}},
	} {
		var b strings.Builder
		printJobTable(&b, tc.jobs)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")[1:]
		var ids []string
		for _, l := range lines {
			ids = append(ids, strings.Fields(l)[0])
		}
		if strings.Join(ids, " ") != strings.Join(tc.ids, " ") {
			t.Errorf("%s: rows %v, want %v\n%s", tc.name, ids, tc.ids, b.String())
		}
	}
}
