package blobstore

import (
	"bytes"
	"context"
	"io"
	"sync"

	"github.com/rbs-build/rbs/rbe/digest"
)

// Memory is a Store that keeps blobs in a map. It is meant for tests and has
// no size bound.
type Memory struct {
	mu    sync.RWMutex
	blobs map[digest.Digest][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{blobs: map[digest.Digest][]byte{}} }

// Get implements Store.
func (m *Memory) Get(_ context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	m.mu.RLock()
	b, ok := m.blobs[d]
	m.mu.RUnlock()
	if !ok {
		return nil, NotFound(d)
	}
	if offset < 0 || offset > int64(len(b)) {
		return nil, badOffset(d, offset, int64(len(b)))
	}
	return io.NopCloser(bytes.NewReader(b[offset:])), nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, d digest.Digest, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.blobs[d] = b
	m.mu.Unlock()
	return nil
}

// FindMissing implements Store.
func (m *Memory) FindMissing(_ context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var missing []digest.Digest
	for _, d := range ds {
		if _, ok := m.blobs[d]; !ok {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// Delete removes a blob; tests use it to simulate eviction.
func (m *Memory) Delete(d digest.Digest) {
	m.mu.Lock()
	delete(m.blobs, d)
	m.mu.Unlock()
}
