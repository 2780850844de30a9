package sched

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Maintenance windows (rbs job reserve): from a window's start no new job
// starts on its workers, and running ones drain; before it, a job starts
// there only if its time limit ends it before the window. Windows are
// durable, and forgotten once over.

// MaxWindow bounds how far ahead a window may start and how long it may
// last.
const MaxWindow = 366 * 24 * time.Hour

// windowName is what a maintenance window may be called. Like the other
// patterns with a bounded repetition, it is compiled at its first use, not
// when every rbs command starts: compiling one allocates some 60 KB.
var windowName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// covers reports whether window r holds worker w.
func covers(r *jobspb.Reservation, w string) bool {
	return len(r.Workers) == 0 || slices.Contains(r.Workers, w)
}

// Reserve adds a maintenance window, checked against the clock and the
// workers known.
func (c *Core) Reserve(r *jobspb.Reservation) error {
	now := c.cfg.Now()
	start, end := time.UnixMilli(r.StartUnixMs), time.UnixMilli(r.EndUnixMs)
	switch {
	case !windowName().MatchString(r.Name):
		return status.Errorf(codes.InvalidArgument, "reservation name %q: want letters, digits, '.', '_' or '-', at most 64", r.Name)
	case c.windows[r.Name] != nil:
		return status.Errorf(codes.AlreadyExists, "reservation %s exists: cancel it first (rbs job reserve --cancel %s)", r.Name, r.Name)
	case !end.After(start):
		return status.Errorf(codes.InvalidArgument, "reservation %s ends before it starts", r.Name)
	case start.Sub(now) > MaxWindow || end.Sub(start) > MaxWindow:
		return status.Errorf(codes.InvalidArgument, "reservation %s: start it within a year, for at most a year", r.Name)
	case !end.After(now):
		return status.Errorf(codes.InvalidArgument, "reservation %s would be over already", r.Name)
	case len(r.Reason) > 1024:
		return status.Errorf(codes.InvalidArgument, "reservation %s: a reason of %d bytes; keep it under 1 KiB", r.Name, len(r.Reason))
	}
	var unknown []string
	for _, w := range r.Workers {
		if c.workers[w] == nil {
			unknown = append(unknown, w)
		}
	}
	if len(unknown) > 0 {
		return status.Errorf(codes.InvalidArgument, "reservation %s: no worker named %s (workers: %s)", r.Name, strings.Join(unknown, ", "), strings.Join(c.workerNames(), ", "))
	}
	r = proto.Clone(r).(*jobspb.Reservation)
	sort.Strings(r.Workers)
	c.windows[r.Name] = r
	c.windowsDirty[r.Name] = r
	c.reschedule = true
	return nil
}

// Unreserve removes a maintenance window.
func (c *Core) Unreserve(name string) error {
	if c.windows[name] == nil {
		return status.Errorf(codes.NotFound, "no reservation named %q", name)
	}
	delete(c.windows, name)
	c.windowsDirty[name] = nil
	c.reschedule = true
	return nil
}

// Windows lists the maintenance windows, the earliest first.
func (c *Core) Windows() []*jobspb.Reservation {
	out := make([]*jobspb.Reservation, 0, len(c.windows))
	for _, r := range c.windows {
		out = append(out, proto.Clone(r).(*jobspb.Reservation))
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].StartUnixMs != out[b].StartUnixMs {
			return out[a].StartUnixMs < out[b].StartUnixMs
		}
		return out[a].Name < out[b].Name
	})
	return out
}

func (c *Core) workerNames() []string {
	var names []string
	for _, w := range c.sortedWorkers() {
		names = append(names, w.name)
	}
	return names
}

// InMaintenance says which workers are in a maintenance window now: all of
// them, or those named.
func (c *Core) InMaintenance() (all bool, workers []string) {
	now := c.cfg.Now().UnixMilli()
	seen := map[string]bool{}
	for _, r := range c.windows {
		if r.StartUnixMs > now || r.EndUnixMs <= now {
			continue
		}
		if len(r.Workers) == 0 {
			return true, nil
		}
		for _, w := range r.Workers {
			if !seen[w] {
				seen[w] = true
				workers = append(workers, w)
			}
		}
	}
	sort.Strings(workers)
	return false, workers
}

// tickWindows forgets windows that are over and has the scheduler look
// again when one starts or ends.
func (c *Core) tickWindows(now time.Time) {
	for name, r := range c.windows {
		start, end := time.UnixMilli(r.StartUnixMs), time.UnixMilli(r.EndUnixMs)
		if !end.After(now) {
			delete(c.windows, name)
			c.windowsDirty[name] = nil
			c.reschedule = true
			continue
		}
		if !start.After(now) && start.After(c.lastTick) {
			c.reschedule = true
		}
	}
	c.lastTick = now
}

// checkWindow keeps a node of j off a worker in a maintenance window, or
// whose window would begin before j's time limit is up.
func checkWindow(c *Core, j *job, w *worker, at when, say bool) string {
	if at != current || len(c.windows) == 0 {
		return ""
	}
	t := c.cfg.Now().UnixMilli()
	limit := j.rec.TimeLimitMs
	// Of the windows that hold the worker back, the earliest is named.
	var first *jobspb.Reservation
	for _, r := range c.windows {
		holds := r.StartUnixMs <= t || limit == 0 || t+limit > r.StartUnixMs
		if !holds || !covers(r, w.name) {
			continue
		}
		if first == nil || r.StartUnixMs < first.StartUnixMs || r.StartUnixMs == first.StartUnixMs && r.Name < first.Name {
			first = r
		}
	}
	switch {
	case first == nil:
		return ""
	case !say:
		return rejected
	}
	about := first.Name
	if first.Reason != "" {
		about += " (" + first.Reason + ")"
	}
	if first.StartUnixMs <= t {
		return fmt.Sprintf("reserved for maintenance %s until %s", about, time.UnixMilli(first.EndUnixMs).UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("reserved for maintenance %s from %s, before the job's time limit is up", about, time.UnixMilli(first.StartUnixMs).UTC().Format(time.RFC3339))
}
