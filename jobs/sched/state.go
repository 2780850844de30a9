package sched

// State is a job's state, in Slurm's words.
type State string

// The job states.
const (
	Pending     State = "PENDING"
	Running     State = "RUNNING"
	Completed   State = "COMPLETED"
	Failed      State = "FAILED"
	Cancelled   State = "CANCELLED"
	Timeout     State = "TIMEOUT"
	NodeFail    State = "NODE_FAIL"
	OutOfMemory State = "OUT_OF_MEMORY"
	// Preempted is how an attempt stopped to make room ends; the job goes
	// back to PENDING unless it must not be requeued.
	Preempted State = "PREEMPTED"
)

// States lists every state, in display order.
var States = []State{Pending, Running, Completed, Failed, Cancelled, Timeout, NodeFail, OutOfMemory, Preempted}

// transitions is the table of legal state changes.
var transitions = map[State][]State{
	// A pending job ends COMPLETED without running when it is answered
	// from the job cache.
	Pending: {Running, Cancelled, Completed},
	// A running job ends, or goes back to PENDING when its worker is lost
	// or it is preempted.
	Running: {Completed, Failed, Cancelled, Timeout, NodeFail, OutOfMemory, Preempted, Pending},
}

// CanMove reports whether a job may go from one state to another.
func CanMove(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Terminal reports whether a job in this state has ended for good.
func (s State) Terminal() bool {
	return s != Pending && s != Running && s != ""
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Pending reasons, in Slurm's words where Slurm has one.
const (
	ReasonPriority                 = "Priority"
	ReasonResources                = "Resources"
	ReasonDependency               = "Dependency"
	ReasonDependencyNeverSatisfied = "DependencyNeverSatisfied"
	ReasonArrayTaskLimit           = "JobArrayTaskLimit"
	// ReasonReservation: a maintenance window holds the workers it could
	// run on, now or before its time limit is up.
	ReasonReservation = "Reservation"
	// ReasonNoWorkerFits: no registered worker could ever run the job.
	ReasonNoWorkerFits = "NoWorkerFits"
	// ReasonNoWorkers: no worker with job slots is registered.
	ReasonNoWorkers = "NoWorkers"
	// ReasonNoWorkerOfPlatform: the job's inputs were built for a platform
	// that no registered worker with job slots has.
	ReasonNoWorkerOfPlatform = "NoWorkerOfPlatform"
	// ReasonJobHeldUser: the job was submitted held and waits to be
	// released.
	ReasonJobHeldUser = "JobHeldUser"
	// ReasonQuotaExceeded: its queue's quota, or its cohort's, is taken;
	// the reason goes on to say which, "QuotaExceeded: queue gpu has 8/8
	// GPUs".
	ReasonQuotaExceeded = "QuotaExceeded"
	// ReasonTopology: the job must be packed in one topology domain
	// (--pack-required), and none has room for all its nodes; the reason
	// goes on to say how many the roomiest has.
	ReasonTopology = "Topology"
	// ReasonCacheCheck: the job cache holds a result for the job, and the
	// server is checking that the CAS still has its outputs before
	// answering the job with it.
	ReasonCacheCheck = "CacheCheck"
)
