package server

import (
	"context"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// metrics are the server's Prometheus metrics: calls by method and code,
// action-cache lookups, the phases of executed actions, and the action
// queue's load, read from the scheduler at each scrape.
type metrics struct {
	requests  *prometheus.CounterVec
	acLookups *prometheus.CounterVec
	phases    *prometheus.HistogramVec
	load      *loadCollector // nil without a scheduler
}

// The phases of an executed action, from its ExecutedActionMetadata.
var phases = []struct {
	name       string
	start, end func(*repb.ExecutedActionMetadata) *timestamppb.Timestamp
}{
	{"queued", (*repb.ExecutedActionMetadata).GetQueuedTimestamp, (*repb.ExecutedActionMetadata).GetWorkerStartTimestamp},
	{"input_fetch", (*repb.ExecutedActionMetadata).GetInputFetchStartTimestamp, (*repb.ExecutedActionMetadata).GetInputFetchCompletedTimestamp},
	{"execution", (*repb.ExecutedActionMetadata).GetExecutionStartTimestamp, (*repb.ExecutedActionMetadata).GetExecutionCompletedTimestamp},
	{"output_upload", (*repb.ExecutedActionMetadata).GetOutputUploadStartTimestamp, (*repb.ExecutedActionMetadata).GetOutputUploadCompletedTimestamp},
}

func newMetrics(sched *scheduler.Scheduler) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rbs_grpc_requests_total",
			Help: "gRPC calls the server answered, by full method name and status code.",
		}, []string{"method", "code"}),
		acLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rbs_action_cache_lookups_total",
			Help: "Action-cache lookups by Execute and GetActionResult, by result: hit, or miss (absent, or referencing blobs no longer in the CAS).",
		}, []string{"method", "result"}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rbs_execute_phase_seconds",
			Help:    "How long executed actions spent in each phase, from their ExecutedActionMetadata: queued (received until a worker started it), input_fetch, execution and output_upload.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 3600, 12),
		}, []string{"phase"}),
	}
	for _, p := range phases {
		m.phases.WithLabelValues(p.name)
	}
	for _, method := range []string{"Execute", "GetActionResult"} {
		for _, result := range []string{"hit", "miss"} {
			m.acLookups.WithLabelValues(method, result)
		}
	}
	if sched != nil {
		m.load = newLoadCollector(sched)
	}
	return m
}

// collectors returns every collector of m.
func (m *metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.requests, m.acLookups, m.phases}
	if m.load != nil {
		cs = append(cs, m.load)
	}
	return cs
}

// observe records the phases of an executed action. A phase whose
// timestamps are missing, or out of order because the clocks of the server
// and the worker disagree, is left out.
func (m *metrics) observe(md *repb.ExecutedActionMetadata) {
	for _, p := range phases {
		start, end := p.start(md), p.end(md)
		if start == nil || end == nil {
			continue
		}
		if d := end.AsTime().Sub(start.AsTime()); d >= 0 {
			m.phases.WithLabelValues(p.name).Observe(d.Seconds())
		}
	}
}

// lookedUp counts an action-cache lookup by method ("Execute" or
// "GetActionResult") that ended with err: nil is a hit, NotFound a miss,
// and any other error neither.
func (m *metrics) lookedUp(method string, err error) {
	switch {
	case err == nil:
		m.acLookups.WithLabelValues(method, "hit").Inc()
	case blobstore.IsNotFound(err):
		m.acLookups.WithLabelValues(method, "miss").Inc()
	}
}

// interceptors count every call by method and code. They come before the
// recovery interceptors, so that a call a panic ended counts as the
// INTERNAL it returns, and before authentication, so that refused calls
// count too.
func (m *metrics) interceptors() []grpc.ServerOption {
	count := func(method string, err error) {
		m.requests.WithLabelValues(method, status.Code(err).String()).Inc()
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		count(info.FullMethod, err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		err := h(srv, ss)
		count(info.FullMethod, err)
		return err
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// loadCollector reports the action queue's load as the scheduler has it at
// each scrape: one short hold of its lock. It is an unchecked collector (it
// describes nothing) because the batch scheduler reports its job slots
// under the same metric names, class="job" beside class="action" here, and
// a registry takes no two collectors that describe one metric; it checks
// at each scrape instead that their help and type agree.
type loadCollector struct {
	sched                             *scheduler.Scheduler
	queued, workers, slots, slotsUsed *prometheus.Desc
}

func newLoadCollector(sched *scheduler.Scheduler) *loadCollector {
	return &loadCollector{
		sched:     sched,
		queued:    prometheus.NewDesc("rbs_actions_queued", "Actions waiting for an action slot.", nil, nil),
		workers:   prometheus.NewDesc("rbs_workers_connected", "Workers connected to the server, as the action queue sees them.", nil, nil),
		slots:     prometheus.NewDesc("rbs_slots", "Slots of the connected workers, by slot class.", []string{"class"}, nil),
		slotsUsed: prometheus.NewDesc("rbs_slots_in_use", "Slots of the connected workers in use, by slot class.", []string{"class"}, nil),
	}
}

// Describe implements prometheus.Collector, describing nothing.
func (c *loadCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.sched.Load()
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(l.Queued))
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(l.Workers))
	ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(l.Slots), "action")
	ch <- prometheus.MustNewConstMetric(c.slotsUsed, prometheus.GaugeValue, float64(l.SlotsUsed), "action")
}
