package partition

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// memLog is an in-memory stand-in for *log.Log with the same offset rules
// (leader appends assign offsets from the LEO and stamp the epoch; follower
// appends must start at the LEO and be contiguous; truncation drops whole
// batches). Read is not supported (it returns file slices); tests move bytes
// with Bytes, which the real log also has.
type memLog struct {
	mu      sync.Mutex
	start   int64
	batches []memBatch
	leo     int64
	closed  bool
}

type memBatch struct {
	base, next int64 // [base, next)
	data       []byte
}

var _ logStore = (*memLog)(nil)

func newMemLog() *memLog { return &memLog{} }

func (m *memLog) Append(blob []byte, assign bool, epoch int32) (log.AppendInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return log.AppendInfo{}, errors.New("memlog closed")
	}
	var info log.AppendInfo
	next := m.leo
	var add []memBatch
	err := records.Split(blob, func(b []byte, h records.Header) error {
		data := append([]byte(nil), b...)
		if assign {
			records.SetBaseOffset(data, next)
			records.SetPartitionLeaderEpoch(data, epoch)
			h.BaseOffset = next
		} else if h.BaseOffset != next {
			return fmt.Errorf("follower batch at %d, expected %d: %w", h.BaseOffset, next, kerr.OffsetOutOfRange)
		}
		if len(add) == 0 {
			info.FirstOffset = h.BaseOffset
		}
		info.LastOffset = h.LastOffset()
		info.Records += int64(h.RecordsCount)
		info.Batches++
		info.Bytes += int64(len(b))
		add = append(add, memBatch{base: h.BaseOffset, next: h.NextOffset(), data: data})
		next = h.NextOffset()
		return nil
	})
	if err != nil {
		return log.AppendInfo{}, err
	}
	m.batches = append(m.batches, add...)
	m.leo = next
	return info, nil
}

func (m *memLog) LEO() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leo
}

func (m *memLog) LogStart() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.start
}

func (m *memLog) Read(offset, maxOffset int64, maxBytes int, minOneBatch bool) (log.Slice, error) {
	return log.Slice{}, errors.New("memLog.Read: use Bytes")
}

func (m *memLog) TruncateTo(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := 0
	for i < len(m.batches) && m.batches[i].next <= offset {
		i++
	}
	m.batches = m.batches[:i]
	m.leo = m.start
	if i > 0 {
		m.leo = m.batches[i-1].next
	}
	return nil
}

func (m *memLog) TruncateFullyAndStartAt(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches, m.start, m.leo = nil, offset, offset
	return nil
}

// ApplyRetention treats every batch as a segment that has expired: it drops
// batches wholly below maxDeletableOffset, always keeping the last one (the
// "active segment").
func (m *memLog) ApplyRetention(nowMs int64, maxDeletableOffset int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for len(m.batches) > 1 && m.batches[0].next <= maxDeletableOffset {
		m.batches = m.batches[1:]
		n++
	}
	if len(m.batches) > 0 {
		m.start = m.batches[0].base
	}
	return n, nil
}

func (m *memLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// reopen returns a fresh handle on the same data (a broker restart).
func (m *memLog) reopen() *memLog {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &memLog{start: m.start, batches: append([]memBatch(nil), m.batches...), leo: m.leo}
}

// Bytes returns the raw batches with base offsets in [from, to).
func (m *memLog) Bytes(from, to int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []byte
	for _, b := range m.batches {
		if b.base >= from && b.base < to {
			out = append(out, b.data...)
		}
	}
	return out, nil
}
