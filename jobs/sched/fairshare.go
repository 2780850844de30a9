package sched

// Fair share, as Slurm's multifactor plugin computes it in its classic
// form. Each user belongs to an account; accounts have shares of the
// cluster, and users shares of their account. A user's usage is what the
// attempts of their jobs took, CPUs, GiB of memory and GPUs times seconds,
// weighted by the queue they ran in and decayed with a half-life. Compared
// with the user's normalised share, it gives a factor from 1 (nothing
// used) through 0.5 (used exactly the share) toward 0, and the factor
// times the fair-share weight is part of every pending job's priority.
//
// Usage moves continuously while jobs run. Each user's is kept as its
// value at a time and the rate at which running attempts add to it, so
// bringing it up to date is one exponential, and it changes only when an
// attempt's node starts or ends: that is when it is written to the store,
// and a restarted server, which knows what runs, goes on from there.

import (
	"math"
	"sort"
	"time"

	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
)

// Account is a fair-share account: its shares of the cluster and its
// users' shares of it.
type Account struct {
	Name   string
	Shares int64
	// Users are the account's members with their shares of it.
	Users map[string]int64
}

// DefaultAccount holds the users no account names, with one share each;
// it has one share of the cluster unless an account of that name is
// declared.
const DefaultAccount = "default"

// FairShare is the fair-share policy.
type FairShare struct {
	Accounts []Account
	// Weight is the priority of a job whose user has used nothing (factor
	// 1); 0 leaves fair share out of priorities.
	Weight int64
	// HalfLife is how long usage takes to count half as much.
	HalfLife time.Duration
	// Billing weighs the three kinds of usage into one: per CPU-second,
	// per GiB-of-memory-second and per GPU-second.
	Billing [3]float64
}

// Fair-share defaults, Slurm's where it has one: a week's half-life; a CPU
// counts as 1, a GiB of memory as 0.25, a GPU as 8.
const defaultHalfLife = 7 * 24 * time.Hour

var defaultBilling = [3]float64{1, 0.25, 8}

// DefaultFairShare is the fair-share policy a cluster configuration starts
// from: a weight of 1,000, a week's half-life, the default billing
// weights, and no account.
func DefaultFairShare() *FairShare {
	return &FairShare{Weight: 1000, HalfLife: defaultHalfLife, Billing: defaultBilling}
}

// usage is one user's decayed usage at a time, and the rate at which the
// user's running attempts add to it, per second.
type usage struct {
	v    [3]float64 // CPU-, GiB-of-memory- and GPU-seconds
	at   time.Time
	rate [3]float64
}

// advance brings u up to t: what it was decays, and what ran since adds,
// decayed for as long as it has been.
func (u *usage) advance(t time.Time, halfLife time.Duration) {
	dt := t.Sub(u.at).Seconds()
	if dt <= 0 {
		return
	}
	lambda := math.Ln2 / halfLife.Seconds()
	decay := math.Exp(-lambda * dt)
	for i := range u.v {
		u.v[i] = u.v[i]*decay + u.rate[i]*(1-decay)/lambda
	}
	u.at = t
}

// nodeRate is what one node of j adds to its user's usage per second.
func (c *Core) nodeRate(j *job) [3]float64 {
	f := c.queues[j.spec.Queue].UsageFactor
	if f == 0 {
		f = 1
	}
	s := j.spec
	return [3]float64{f * float64(cpusOf(s)), f * float64(s.MemoryBytes) / (1 << 30), f * float64(s.Gpus)}
}

// charge adds (sign 1) or takes away (sign -1) one node of j from its
// user's rate of usage, bringing the usage up to date first, and marks it
// for the store.
func (c *Core) charge(j *job, sign float64) {
	user := j.spec.User
	u := c.usage[user]
	now := c.cfg.Now()
	if u == nil {
		u = &usage{at: now}
		c.usage[user] = u
	}
	u.advance(now, c.halfLife())
	r := c.nodeRate(j)
	for i := range u.rate {
		u.rate[i] += sign * r[i]
		if math.Abs(u.rate[i]) < 1e-9 {
			u.rate[i] = 0 // no drift from sums that cancel
		}
	}
	c.usageDirty[user] = true
}

func (c *Core) halfLife() time.Duration {
	if c.cfg.FairShare == nil || c.cfg.FairShare.HalfLife <= 0 {
		return defaultHalfLife
	}
	return c.cfg.FairShare.HalfLife
}

func (c *Core) billing() [3]float64 {
	if c.cfg.FairShare == nil || c.cfg.FairShare.Billing == [3]float64{} {
		return defaultBilling
	}
	return c.cfg.FairShare.Billing
}

// usageRecords returns the store's rows for the users whose usage changed
// since the last Flush.
func (c *Core) usageRecords() []store.Usage {
	out := make([]store.Usage, 0, len(c.usageDirty))
	for user := range c.usageDirty {
		u := c.usage[user]
		out = append(out, store.Usage{User: user, CPU: u.v[0], Memory: u.v[1], GPU: u.v[2], AtUnixMs: u.at.UnixMilli()})
	}
	clear(c.usageDirty)
	sort.Slice(out, func(a, b int) bool { return out[a].User < out[b].User })
	return out
}

// shareTable is fair share worked out at one time: each account's
// normalised share and usage, and each user's, from which a factor
// follows for any user, known or not.
type shareTable struct {
	config   *FairShare // what it was worked out under
	weight   int64
	accounts map[string]*accountShare
	// members are the users accounts name, with their account and shares.
	members map[string]member
	users   map[string]*userShare // those with usage
	total   float64               // the cluster's billed usage
}

type accountShare struct {
	shares int64
	share  float64 // of the cluster
	// userShares is the sum of its users' shares: the declared ones
	// (declared), and in the default account one for each user with usage.
	userShares int64
	declared   int64
	usage      [3]float64
	billed     float64
}

type member struct {
	account string
	shares  int64
}

type userShare struct {
	usage  [3]float64
	billed float64
}

// shares works out the share table at now from the usage of each user.
func (c *Core) shares(now time.Time) *shareTable {
	t := &shareTable{}
	c.sharesInto(t, now)
	return t
}

// sharesInto works the share table out into t, over what t held: the
// accounts and members declared, kept while the cluster's fair-share
// config is the same, and each user's and account's figures, set again.
func (c *Core) sharesInto(t *shareTable, now time.Time) {
	fs := c.cfg.FairShare
	if t.accounts == nil || t.config != fs {
		*t = shareTable{config: fs, accounts: map[string]*accountShare{}, members: map[string]member{}, users: map[string]*userShare{}}
		if fs != nil {
			for _, a := range fs.Accounts {
				as := &accountShare{shares: a.Shares}
				for user, n := range a.Users {
					t.members[user] = member{a.Name, n}
					as.declared += n
				}
				t.accounts[a.Name] = as
			}
		}
	}
	t.weight, t.total = 0, 0
	if fs != nil {
		t.weight = fs.Weight
	}
	for _, a := range t.accounts {
		a.userShares, a.usage, a.billed = a.declared, [3]float64{}, 0
	}
	bill := c.billing()
	halfLife := c.halfLife()
	for user, u := range c.usage {
		v := *u
		v.advance(now, halfLife)
		us := t.users[user]
		if us == nil {
			us = &userShare{}
			t.users[user] = us
		}
		*us = userShare{usage: v.v, billed: v.v[0]*bill[0] + v.v[1]*bill[1] + v.v[2]*bill[2]}
		t.total += us.billed
		a := t.account(user)
		if _, declared := t.members[user]; !declared {
			a.userShares++
		}
		for i := range a.usage {
			a.usage[i] += us.usage[i]
		}
		a.billed += us.billed
	}
	var shares int64
	for _, a := range t.accounts {
		shares += a.shares
	}
	for _, a := range t.accounts {
		if shares > 0 {
			a.share = float64(a.shares) / float64(shares)
		}
	}
}

// account returns user's account, making the default one when it is
// first needed.
func (t *shareTable) account(user string) *accountShare {
	name := t.accountName(user)
	a := t.accounts[name]
	if a == nil {
		a = &accountShare{shares: 1}
		t.accounts[name] = a
	}
	return a
}

// userView is what the table says of one user: their shares of their
// account, normalised share of the cluster, usage (normalised and
// effective) and factor.
type userView struct {
	account             *accountShare
	shares              int64
	share, norm, eff, f float64
	usage               *userShare
}

// user works out the table's figures for user. A user the table has not
// met (no usage yet, in no account) counts as one share of the default
// account.
func (t *shareTable) user(user string) userView {
	v := userView{shares: 1, usage: t.users[user]}
	if m, ok := t.members[user]; ok {
		v.shares = m.shares
	}
	v.account = t.accounts[t.accountName(user)]
	siblings := int64(1)
	accShare, accUsage := 1.0, 0.0
	if a := v.account; a != nil {
		siblings, accShare = max(a.userShares, 1), a.share
		if t.total > 0 {
			accUsage = a.billed / t.total
		}
	}
	frac := float64(v.shares) / float64(siblings)
	v.share = accShare * frac
	if v.usage != nil && t.total > 0 {
		v.norm = v.usage.billed / t.total
	}
	v.eff = v.norm + (accUsage-v.norm)*frac
	v.f = factor(v.eff, v.share)
	return v
}

// factor is Slurm's classic fair-share factor, 2^(-usage/share): 1 for no
// usage, 0 for usage without a share.
func factor(usage, share float64) float64 {
	switch {
	case usage == 0:
		return 1
	case share == 0:
		return 0
	}
	return math.Exp2(-usage / share)
}

func (t *shareTable) accountName(user string) string {
	if m, ok := t.members[user]; ok {
		return m.account
	}
	return DefaultAccount
}

// fairShare is the fair-share part of the priority of a pending job of
// user, and the factor it comes from.
func (c *Core) fairShare(user string) (int64, float64) {
	t := c.fair
	if t == nil || t.weight == 0 {
		return 0, 0
	}
	f := t.user(user).f
	return int64(math.Round(float64(t.weight) * f)), f
}

// fairPrio is a user's fairShare priority as of a round (fairSlots).
type fairPrio struct {
	prio  int64
	user  string
	round int64
}

// jobFairShare is fairShare's priority for j's user. The live Core keeps it
// in the user's slot for the round (slotFairShare); a View's replica, read
// concurrently, keeps nothing.
func (c *Core) jobFairShare(j *job) int64 {
	if c.fair == nil || c.fair.weight == 0 {
		return 0
	}
	if c.view == nil {
		p, _ := c.fairShare(j.spec.User)
		return p
	}
	return c.slotFairShare(c.slotOf(j))
}

// slotOf returns the fair-share slot of j's user (see fairSlots), which j
// keeps, so that it is found without hashing the user's name.
func (c *Core) slotOf(j *job) int32 {
	if j.user == 0 {
		i, ok := c.userSlot[j.spec.User]
		if !ok {
			if c.userSlot == nil {
				c.userSlot = map[string]int32{}
			}
			i = int32(len(c.fairSlots))
			c.userSlot[j.spec.User] = i
			c.fairSlots = append(c.fairSlots, fairPrio{user: j.spec.User})
		}
		j.user = i + 1
	}
	return j.user
}

// slotFairShare is fairShare's priority for the user of slot, worked out
// once a round.
func (c *Core) slotFairShare(slot int32) int64 {
	if c.fair == nil || c.fair.weight == 0 {
		return 0
	}
	p := &c.fairSlots[slot-1]
	if p.round != c.fairRound {
		p.prio, _ = c.fairShare(p.user)
		p.round = c.fairRound
	}
	return p.prio
}

// refreshShares works the share table out again, as each round does,
// into a table neither the Core's last nor the View's replica holds (the
// replica is read concurrently): the Core keeps three and goes round them.
func (c *Core) refreshShares(now time.Time) {
	if c.cfg.FairShare == nil || c.cfg.FairShare.Weight == 0 {
		return
	}
	var published *shareTable
	if c.view != nil {
		published = c.view.r.fair
	}
	for i, t := range c.shareTables {
		if t == nil {
			t = &shareTable{}
			c.shareTables[i] = t
		}
		if t != c.fair && t != published {
			c.sharesInto(t, now)
			c.fair = t
			break
		}
	}
	c.fairRound++
}

// Shares answers `rbs job shares`: every account, with its users, as fair
// share sees them now.
func (c *Core) Shares() *jobspb.SharesResponse {
	t := c.shares(c.cfg.Now())
	fs := c.cfg.FairShare
	if fs == nil {
		fs = &FairShare{}
	}
	out := &jobspb.SharesResponse{HalfLifeMs: c.halfLife().Milliseconds(), Weight: t.weight}
	members := map[string][]string{}
	for _, a := range fs.Accounts {
		for user := range a.Users {
			members[a.Name] = append(members[a.Name], user)
		}
	}
	for user := range t.users {
		if _, declared := t.members[user]; !declared {
			members[DefaultAccount] = append(members[DefaultAccount], user)
		}
	}
	names := make([]string, 0, len(t.accounts))
	for name := range t.accounts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a := t.accounts[name]
		ai := &jobspb.AccountShare{Name: name, Shares: a.shares, Share: a.share,
			CpuSeconds: a.usage[0], MemoryGibSeconds: a.usage[1], GpuSeconds: a.usage[2], BillingSeconds: a.billed}
		if t.total > 0 {
			ai.Usage = a.billed / t.total
		}
		ai.EffectiveUsage, ai.Factor = ai.Usage, factor(ai.Usage, a.share)
		users := members[name]
		sort.Strings(users)
		for _, user := range users {
			v := t.user(user)
			ui := &jobspb.AccountShare{Name: user, Shares: v.shares, Share: v.share, Usage: v.norm, EffectiveUsage: v.eff, Factor: v.f}
			if u := v.usage; u != nil {
				ui.CpuSeconds, ui.MemoryGibSeconds, ui.GpuSeconds, ui.BillingSeconds = u.usage[0], u.usage[1], u.usage[2], u.billed
			}
			ai.Users = append(ai.Users, ui)
		}
		out.Accounts = append(out.Accounts, ai)
	}
	return out
}
