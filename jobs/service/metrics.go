package service

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/jobs/sched"
)

// metrics are the batch scheduler's Prometheus metrics: the gauges are read
// from the View at each scrape; the pending-time histogram is fed as jobs
// start, and the event-time one as rounds end.
type metrics struct {
	read    func(func(*sched.Core))
	pending *prometheus.HistogramVec
	events  *prometheus.HistogramVec

	jobs, workers, slots, slotsUsed, gpus, gpusUsed *prometheus.Desc
}

func newMetrics(read func(func(*sched.Core))) *metrics {
	return &metrics{
		read: read,
		pending: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rbs_job_pending_seconds",
			Help:    "How long jobs waited from their submission until an attempt started, by queue.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12), // 10 ms to about 12 h
		}, []string{"queue"}),
		events: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rbs_job_event_seconds",
			Help: "How long the scheduler takes to act on an event: from a submission's arrival (event=submit), or a job end's (event=end), until the round that takes it has committed and sent workers the starts it decided. " +
				"A job that can start at once is sent to its worker within its submission's time, which ends before the submission is acknowledged; a job waiting on a dependency, within the time of the end that frees it.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 14), // 0.25 ms to 2 s
		}, []string{"event"}),
		jobs:      prometheus.NewDesc("rbs_jobs", "Jobs (array tasks one by one) the scheduler holds, by queue and state.", []string{"queue", "state"}, nil),
		workers:   prometheus.NewDesc("rbs_job_workers", "Connected workers as the batch scheduler sees them.", nil, nil),
		slots:     prometheus.NewDesc("rbs_slots", "Slots of the connected workers, by slot class.", []string{"class"}, nil),
		slotsUsed: prometheus.NewDesc("rbs_slots_in_use", "Slots of the connected workers in use, by slot class.", []string{"class"}, nil),
		gpus:      prometheus.NewDesc("rbs_gpus", "GPUs of the connected workers.", nil, nil),
		gpusUsed:  prometheus.NewDesc("rbs_gpus_allocated", "GPUs held by running jobs.", nil, nil),
	}
}

func (m *metrics) waited(queue string, d time.Duration) {
	m.pending.WithLabelValues(queue).Observe(d.Seconds())
}

// acted counts a round's time to act on an event.
func (m *metrics) acted(event string, d time.Duration) {
	m.events.WithLabelValues(event).Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.pending.Describe(ch)
	m.events.Describe(ch)
	for _, d := range []*prometheus.Desc{m.jobs, m.workers, m.slots, m.slotsUsed, m.gpus, m.gpusUsed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.pending.Collect(ch)
	m.events.Collect(ch)
	var u sched.Usage
	m.read(func(c *sched.Core) { u = c.Usage() })
	for k, n := range u.Jobs {
		ch <- prometheus.MustNewConstMetric(m.jobs, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	ch <- prometheus.MustNewConstMetric(m.workers, prometheus.GaugeValue, float64(u.Workers))
	ch <- prometheus.MustNewConstMetric(m.slots, prometheus.GaugeValue, float64(u.JobSlots), "job")
	ch <- prometheus.MustNewConstMetric(m.slotsUsed, prometheus.GaugeValue, float64(u.JobSlotsUsed), "job")
	ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(u.GPUs))
	ch <- prometheus.MustNewConstMetric(m.gpusUsed, prometheus.GaugeValue, float64(u.GPUsUsed))
}

// Collectors returns the batch scheduler's Prometheus collectors.
func (s *Service) Collectors() []prometheus.Collector { return []prometheus.Collector{s.metrics} }
