package sched

import (
	"sort"
	"time"
)

// ended is a job, or an array whose tasks have all ended, and when its last
// part ended.
type ended struct {
	id int64
	at time.Time
}

// finished notes that one more part of job id has ended; when none is left
// open the job joins the queue of those to forget.
func (c *Core) finished(id int64) {
	c.open[id]--
	if c.open[id] == 0 {
		delete(c.open, id)
		c.ended = append(c.ended, ended{id, c.cfg.Now()})
	}
}

// queueEnded queues, oldest first, the jobs loaded from the store whose
// parts have all ended.
func (c *Core) queueEnded() {
	last := map[int64]int64{}
	for k, j := range c.jobs {
		if c.open[k.ID] == 0 {
			last[k.ID] = max(last[k.ID], j.rec.EndUnixMs)
		}
	}
	for id, ms := range last {
		c.ended = append(c.ended, ended{id, time.UnixMilli(ms)})
	}
	sort.Slice(c.ended, func(a, b int) bool { return c.ended[a].at.Before(c.ended[b].at) })
}

// forgetOld drops the jobs that ended at least Retention ago, records,
// spec and output, unless a waiting job depends on them: those are kept,
// and looked at again a Retention later.
func (c *Core) forgetOld(now time.Time) {
	if c.cfg.Retention <= 0 {
		return
	}
	var needed map[int64]bool
	var again []ended
	for len(c.ended) > 0 && now.Sub(c.ended[0].at) >= c.cfg.Retention {
		e := c.ended[0]
		c.ended = c.ended[1:]
		if needed == nil {
			needed = map[int64]bool{}
			for _, j := range c.pending {
				for _, d := range j.spec.Deps {
					needed[d.JobId] = true
				}
			}
		}
		if needed[e.id] {
			again = append(again, ended{e.id, now})
			continue
		}
		for _, j := range c.depTargets(Key{e.id, -1}) {
			c.forgetEntry(j)
			delete(c.jobs, j.key)
			delete(c.dirty, j.key)
			c.seen[j.key] = true
			c.counts[j.state()]--
		}
		delete(c.arrays, e.id)
		if key, ok := c.keyOf[e.id]; ok {
			delete(c.submits, key)
			delete(c.keyOf, e.id)
		}
		c.forget = append(c.forget, e.id)
	}
	c.ended = append(c.ended, again...)
}
