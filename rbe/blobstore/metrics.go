package blobstore

import (
	"context"
	"io"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rbs-build/rbs/rbe/digest"
)

// Metrics is a prometheus.Collector of what passes through the stores it
// instruments, each under its own store label (such as "cas" and "ac"):
// bytes read and written, lookups (each Get, and each digest FindMissing is
// asked about) and the hits among them, and, for stores that count them
// (Disk), evictions and the bytes held.
type Metrics struct {
	read, written, lookups, hits *prometheus.CounterVec
	evictions, size              *prometheus.Desc

	mu      sync.Mutex
	bounded map[string]bounded // by store label
}

// bounded is a store that reports its evictions and size, as Disk does.
type bounded interface {
	Evictions() int64
	Size() int64
}

// NewMetrics returns Metrics instrumenting no store yet.
func NewMetrics() *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"store"})
	}
	return &Metrics{
		read:      counter("rbs_blobstore_read_bytes_total", "Bytes read from the store's blobs."),
		written:   counter("rbs_blobstore_written_bytes_total", "Bytes of blobs stored."),
		lookups:   counter("rbs_blobstore_lookups_total", "Blobs looked up: each Get, and each digest an existence check (FindMissing) asks about."),
		hits:      counter("rbs_blobstore_hits_total", "Lookups that found their blob."),
		evictions: prometheus.NewDesc("rbs_blobstore_evictions_total", "Blobs evicted to keep the store within its bound or to make room on a full disk.", []string{"store"}, nil),
		size:      prometheus.NewDesc("rbs_blobstore_size_bytes", "Bytes the store holds.", []string{"store"}, nil),
		bounded:   map[string]bounded{},
	}
}

// Instrument returns s counting into m under the label store=name. When s
// reports its evictions and size, as a Disk does, m exports those too.
func (m *Metrics) Instrument(name string, s Store) Store {
	if b, ok := s.(bounded); ok {
		m.mu.Lock()
		m.bounded[name] = b
		m.mu.Unlock()
	}
	return instrumented{
		Store:   s,
		read:    m.read.WithLabelValues(name),
		written: m.written.WithLabelValues(name),
		lookups: m.lookups.WithLabelValues(name),
		hits:    m.hits.WithLabelValues(name),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range []*prometheus.CounterVec{m.read, m.written, m.lookups, m.hits} {
		c.Describe(ch)
	}
	ch <- m.evictions
	ch <- m.size
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range []*prometheus.CounterVec{m.read, m.written, m.lookups, m.hits} {
		c.Collect(ch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, b := range m.bounded {
		ch <- prometheus.MustNewConstMetric(m.evictions, prometheus.CounterValue, float64(b.Evictions()), name)
		ch <- prometheus.MustNewConstMetric(m.size, prometheus.GaugeValue, float64(b.Size()), name)
	}
}

type instrumented struct {
	Store
	read, written, lookups, hits prometheus.Counter
}

func (s instrumented) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	s.lookups.Inc()
	rc, err := s.Store.Get(ctx, d, offset)
	if err != nil {
		return nil, err
	}
	s.hits.Inc()
	return countingReadCloser{rc, s.read}, nil
}

func (s instrumented) Put(ctx context.Context, d digest.Digest, r io.Reader) error {
	cr := &countingReader{r: r}
	if err := s.Store.Put(ctx, d, cr); err != nil {
		return err
	}
	s.written.Add(float64(cr.n))
	return nil
}

func (s instrumented) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	missing, err := s.Store.FindMissing(ctx, ds)
	if err != nil {
		return nil, err
	}
	s.lookups.Add(float64(len(ds)))
	s.hits.Add(float64(len(ds) - len(missing)))
	return missing, nil
}

// countingReadCloser adds the bytes read through it to a counter.
type countingReadCloser struct {
	io.ReadCloser
	read prometheus.Counter
}

func (c countingReadCloser) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.read.Add(float64(n))
	}
	return n, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
