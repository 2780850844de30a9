package sched

import "time"

// Planning ahead for the job at the head of those waiting scans every
// worker and what runs there: finding victims to preempt, and reserving the
// workers that free up first. With a queue that does not drain, every round
// meets the same head; a round keeps what an earlier one worked out for it
// for replanEvery, or until workers join or leave, as Slurm's backfill
// plans every bf_interval. What a kept plan misses meanwhile only ever
// delays the head: jobs that end free room sooner than it counts on, and a
// job that starts on a reserved worker takes from what the reservation
// leaves (reservation.take).

// replanEvery is how long a plan for the same head is kept.
const replanEvery = 5 * time.Second

// replan is what rounds worked out for one waiting job.
type replan struct {
	j *job
	// res is the job's reservation; nil when none is kept.
	res *reservation
	// noVictims says preempting found nothing to stop for it.
	noVictims bool
	at        time.Time
	epoch     int64 // the Core's workerEpoch then
}

// planFor returns the plan of j, if it is still good at now; else a new
// one.
func (c *Core) planFor(j *job, now time.Time) *replan {
	p := &c.replan
	if p.j != j || p.epoch != c.workerEpoch || p.expired(now) {
		*p = replan{j: j, at: now, epoch: c.workerEpoch}
	}
	return p
}

// expired reports whether the plan is past keeping at now.
func (p *replan) expired(now time.Time) bool {
	return now.Sub(p.at) >= replanEvery || now.Before(p.at)
}

// replanDue reports whether time alone has made the kept plan stale: a
// round then plans again, as what it planned around may have changed.
func (c *Core) replanDue(now time.Time) bool {
	p := &c.replan
	return p.j != nil && (p.expired(now) || p.res.passed(now))
}

// passed reports whether the reserved start has passed at now.
func (r *reservation) passed(now time.Time) bool {
	return r != nil && !r.at.IsZero() && now.After(r.at)
}

// reservation returns j's reservation (see reserve), made again only when
// the plan kept for j is not good any more, or its start has passed.
func (c *Core) reservation(j *job, now time.Time) *reservation {
	p := c.planFor(j, now)
	if p.res == nil || p.res.passed(now) {
		p.res = c.reserve(j)
	}
	return p.res
}

// tryPreempt is preempt, but a job that found nothing to preempt does not
// look again while its plan is kept.
func (c *Core) tryPreempt(j *job, workers []*worker, now time.Time) bool {
	if c.preempting[j.key] == nil {
		if p := c.planFor(j, now); p.noVictims {
			return false
		}
	}
	if c.preempt(j, workers, now) {
		return true
	}
	c.planFor(j, now).noVictims = true
	return false
}
