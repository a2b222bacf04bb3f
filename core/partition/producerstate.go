package partition

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// This file is the idempotent-producer state of one partition replica: a
// simplified version of Kafka's ProducerStateManager (snapshots at Close, snapshot.go, and of
// the producers below the log start, logstartsnap.go; producer-id expiration, expire.go).
// Transactions (open transactions, markers, the aborted list and the LSO) are in txnstate.go.
//
// Per producer id it keeps the producer epoch and the metadata of the last
// NumBatchesToRetain batches of that epoch (first/last sequence, first/last
// offset, all inclusive). On the leader, a batch with a producer id >= 0 is
// checked against it before it is appended (Kafka's rules):
//
//   - same epoch, (baseSequence, lastSequence) equal to one of the retained
//     batches: a duplicate (a client retry of a batch already written). It is
//     NOT appended; the append "succeeds" with the original batch's offsets.
//   - same epoch, baseSequence == lastSequence+1 (int32 wrap to 0): appended.
//   - same epoch, anything else: OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - a higher epoch: the sequence restarts; baseSequence must be 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - a lower epoch: INVALID_PRODUCER_EPOCH (the producer was fenced).
//   - an unknown producer id: accepted whatever its sequence (Kafka >= 2.5,
//     KIP-360: the producer's earlier batches may have been removed by
//     retention), and tracked from then on.
//
// Followers apply the same state from the batches they append (no checks),
// so a new leader deduplicates retries of batches the old leader wrote.
// After a truncation, and when the replica is opened, the state is rebuilt
// from the batch headers in the log (log.ForEachBatchHeader), so it never
// remembers a batch the log no longer holds, on top of the log-start snapshot:
// the producers whose batches retention or DeleteRecords deleted (logstartsnap.go).
//
// Concurrency: producerState.mu (short critical sections, never held across
// I/O) guards the map and every entry's epoch and batches. On the leader,
// each producer id has an append mutex (producerEntry.appendMu) held around
// check + log append + record of that producer's batches, so two concurrent
// retries of one batch cannot both be appended and a producer's next batch
// is checked only after its previous one is recorded; different producers'
// batches are still group-committed together by the log. Appends without a
// producer id take neither lock and keep the lock-free, allocation-free path.
// Followers and truncation take producerState.mu under the Replica's roleMu
// (lock order: roleMu, appendMu, producerState.mu).

// NumBatchesToRetain is how many recent batches per producer are kept for
// duplicate detection (Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN,
// which matches max.in.flight.requests.per.connection <= 5 for idempotence).
const NumBatchesToRetain = 5

// batchMeta is what the producer state remembers of one batch. Sequences
// and offsets are inclusive.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	maxTimestamp            int64 // the batch's maxTimestamp (ms)
}

// producerEntry is one producer id's state: its epoch and a ring of its last
// batches of that epoch (oldest first from head). An entry with n == 0 (a
// leader append of a new producer in progress or failed) counts as unknown.
type producerEntry struct {
	// appendMu serialises the leader appends of this producer (check, log
	// append, record); never held by followers or truncation.
	appendMu sync.Mutex

	// guarded by producerState.mu
	epoch      int16
	coordEpoch int32 // coordinator epoch of the last marker (txnstate.go)
	// lastAt is the offset of the last batch or marker that changed this entry (-1: none
	// yet): once the log start passes it, only a log-start snapshot still knows the producer
	// (logstartsnap.go).
	lastAt int64
	// lastTs is the timestamp (ms) of the last batch (its maxTimestamp) or marker: Kafka's
	// lastTimestamp, which producer.id.expiration.ms counts from (expire.go); -1 unknown.
	lastTs  int64
	batches [NumBatchesToRetain]batchMeta
	head, n int
}

func (e *producerEntry) last() batchMeta {
	return e.batches[(e.head+e.n-1)%NumBatchesToRetain]
}

// newProducerEntry is the entry of a producer first seen at epoch (-1: not yet known).
func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordEpoch: -1, lastAt: -1, lastTs: -1}
}

func (e *producerEntry) push(m batchMeta) {
	e.lastTs = m.maxTimestamp
	if e.n < NumBatchesToRetain {
		e.batches[(e.head+e.n)%NumBatchesToRetain] = m
		e.n++
		return
	}
	e.batches[e.head] = m
	e.head = (e.head + 1) % NumBatchesToRetain
}

func (e *producerEntry) reset(epoch int16) { e.epoch, e.head, e.n = epoch, 0, 0 }

// findDuplicate returns the retained batch with the same sequence range.
func (e *producerEntry) findDuplicate(firstSeq, lastSeq int32) (batchMeta, bool) {
	for i := 0; i < e.n; i++ {
		m := e.batches[(e.head+i)%NumBatchesToRetain]
		if m.firstSeq == firstSeq && m.lastSeq == lastSeq {
			return m, true
		}
	}
	return batchMeta{}, false
}

// producerState is the per-partition map producer id -> entry. See the
// file comment for the rules and the locking.
type producerState struct {
	mu        sync.Mutex
	producers map[int64]*producerEntry
	txn       txnState // transactions (txnstate.go)
	// logStartSnap is the log-start snapshot in effect (logstartsnap.go).
	logStartSnap logStartSnap
}

// lastSequence is the sequence of the batch's last record: baseSequence +
// lastOffsetDelta, wrapping past math.MaxInt32 to 0 (Kafka's
// DefaultRecordBatch.incrementSequence).
func lastSequence(baseSeq, lastOffsetDelta int32) int32 {
	if baseSeq > math.MaxInt32-lastOffsetDelta {
		return baseSeq - (math.MaxInt32 - lastOffsetDelta) - 1
	}
	return baseSeq + lastOffsetDelta
}

// nextSequence is the sequence expected after seq (int32 wrap to 0).
func nextSequence(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}

// ProducerBatch is the metadata of one retained batch of a producer, for
// tools and tests. Sequences and offsets are inclusive.
type ProducerBatch struct {
	FirstSequence, LastSequence int32
	FirstOffset, LastOffset     int64
	MaxTimestamp                int64 // the batch's maxTimestamp (ms)
}

// ProducerInfo is a copy of one producer id's state on this replica.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	Batches       []ProducerBatch // oldest first, at most NumBatchesToRetain
	// CoordinatorEpoch is the transaction coordinator epoch of its last marker (-1: none);
	// TxnStartOffset the first offset of its open transaction (-1: none).
	CoordinatorEpoch int32
	TxnStartOffset   int64
}

// Producer returns a copy of producer id's state on this replica (leader or
// follower) and whether it is known. Safe for concurrent use.
func (r *Replica) Producer(id int64) (ProducerInfo, bool) {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e, ok := ps.producers[id]
	if !ok || e.n == 0 {
		return ProducerInfo{ProducerID: id, ProducerEpoch: -1}, false
	}
	out := ProducerInfo{ProducerID: id, ProducerEpoch: e.epoch, Batches: make([]ProducerBatch, 0, e.n), CoordinatorEpoch: e.coordEpoch, TxnStartOffset: -1}
	if first, ok := ps.txn.ongoing[id]; ok {
		out.TxnStartOffset = first
	}
	for i := 0; i < e.n; i++ {
		m := e.batches[(e.head+i)%NumBatchesToRetain]
		out.Batches = append(out.Batches, ProducerBatch{FirstSequence: m.firstSeq, LastSequence: m.lastSeq, FirstOffset: m.firstOffset, LastOffset: m.lastOffset, MaxTimestamp: m.maxTimestamp})
	}
	return out, true
}

// OpenTxn returns producer id's epoch on this replica and whether it has a transaction open
// here: Producer's answer without copying the batches (the leader asks it for every
// transactional batch). Safe for concurrent use.
func (r *Replica) OpenTxn(id int64) (epoch int16, open bool) {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e, ok := ps.producers[id]
	if !ok || e.n == 0 {
		return -1, false
	}
	_, open = ps.txn.ongoing[id]
	return e.epoch, open
}

// Producers returns how many producer ids this replica tracks.
func (r *Replica) Producers() int {
	r.producers.mu.Lock()
	defer r.producers.mu.Unlock()
	n := 0
	for _, e := range r.producers.producers {
		if e.n > 0 {
			n++
		}
	}
	return n
}

// isIdempotentBlob reports whether blob needs the producer-state path: its
// first batch carries a producer id, or it holds more than one batch (then
// any of them might). A blob whose first header does not parse goes the
// normal path, where the log reports the error. Allocation-free.
func isIdempotentBlob(blob []byte) bool {
	h, err := records.ParseHeader(blob)
	if err != nil {
		return false
	}
	return h.ProducerID >= 0 || h.IsControl() || h.Size() < len(blob)
}

// appendIdempotent is AppendAsLeader's append for a blob that
// isIdempotentBlob selected: check the sequence, append, record — all under
// the producer's appendMu. A duplicate (dup true, err nil) returns the original batch's
// offsets with Batches == 0 and Records == 0 and appends nothing.
func (r *Replica) appendIdempotent(blob []byte, leaderEpoch int32) (info log.AppendInfo, dup bool, err error) {
	var h records.Header
	n := 0
	idempotent := false
	for b := blob; len(b) > 0; n++ {
		bh, perr := records.ParseHeader(b)
		if perr != nil || bh.Size() > len(b) {
			break // malformed: the log's validation names the problem
		}
		if n == 0 {
			h = bh
		}
		idempotent = idempotent || bh.ProducerID >= 0
		if bh.IsControl() {
			// Kafka's LogValidator: only the coordinator writes markers (WriteTxnMarkers).
			return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: a produce request must not carry a control batch (offset delta %d): %w",
				r.topic, r.partition, len(blob)-len(b), kerr.InvalidRecord)
		}
		b = b[bh.Size():]
	}
	if !idempotent {
		info, err = r.log.Append(blob, true, leaderEpoch)
		return info, false, err
	}
	if n != 1 {
		// Kafka: produce requests with magic v2 must carry exactly one batch
		// per partition (and the sequence check is per batch).
		return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: idempotent produce must carry exactly one record batch per partition, got %d: %w",
			r.topic, r.partition, n, kerr.InvalidRecord)
	}
	if h.ProducerEpoch < 0 || h.BaseSequence < 0 {
		return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: batch of producer id %d has producer epoch %d and base sequence %d (both must be >= 0): %w",
			r.topic, r.partition, h.ProducerID, h.ProducerEpoch, h.BaseSequence, kerr.InvalidRecord)
	}
	firstSeq, lastSeq := h.BaseSequence, lastSequence(h.BaseSequence, h.LastOffsetDelta)

	ps := &r.producers
	e := ps.appendLock(h.ProducerID)
	defer e.appendMu.Unlock()
	ps.mu.Lock()
	if ps.producers[h.ProducerID] != e {
		// A truncation rebuilt the state meanwhile (this replica is no
		// longer the leader, or is about to learn it), or the producer expired: let the
		// client retry.
		ps.mu.Unlock()
		return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: producer state rebuilt or expired during the append of producer id %d: %w",
			r.topic, r.partition, h.ProducerID, kerr.NotLeaderForPartition)
	}
	err = e.check(h, firstSeq, lastSeq)
	if _, open := ps.txn.ongoing[h.ProducerID]; err == nil && open && !h.IsTransactional() {
		err = fmt.Errorf("producer id %d wrote a non-transactional batch while its transaction is open: %w", h.ProducerID, kerr.InvalidTxnState)
	}
	var m batchMeta
	dup = err == nil && e.n > 0 && h.ProducerEpoch == e.epoch
	if dup {
		m, dup = e.findDuplicate(firstSeq, lastSeq)
	}
	ps.mu.Unlock()
	if err != nil {
		return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	if dup {
		// Validate as the log would have: a corrupt retry is not a success.
		if _, verr := records.Validate(blob); verr != nil {
			return log.AppendInfo{}, false, fmt.Errorf("partition %s-%d: producer id %d: %w", r.topic, r.partition, h.ProducerID, verr)
		}
		return log.AppendInfo{FirstOffset: m.firstOffset, LastOffset: m.lastOffset, MaxTimestamp: -1}, true, nil
	}
	// The log append runs outside ps.mu: other producers' batches (and
	// plain ones) are group-committed with it; this producer's next batch
	// waits on e.appendMu.
	info, err = r.log.Append(blob, true, leaderEpoch)
	if err != nil {
		return info, false, err
	}
	ps.mu.Lock()
	ps.recordLocked(h.ProducerID, h.ProducerEpoch, batchMeta{firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: info.FirstOffset, lastOffset: info.LastOffset, maxTimestamp: h.MaxTimestamp})
	if h.IsTransactional() {
		ps.txn.beginLocked(h.ProducerID, info.FirstOffset)
	}
	ps.mu.Unlock()
	return info, false, nil
}

// appendLock returns producer id's entry (creating an empty one, n == 0,
// which counts as unknown) with its appendMu held.
func (ps *producerState) appendLock(id int64) *producerEntry {
	ps.mu.Lock()
	e := ps.producers[id]
	if e == nil {
		if ps.producers == nil {
			ps.producers = make(map[int64]*producerEntry)
		}
		e = newProducerEntry(-1)
		ps.producers[id] = e
	}
	ps.mu.Unlock()
	e.appendMu.Lock()
	return e
}

// check applies the sequence rules (see the file comment) to batch h with
// sequences [firstSeq, lastSeq] (ps.mu held). A duplicate passes the check;
// the caller looks it up.
func (e *producerEntry) check(h records.Header, firstSeq, lastSeq int32) error {
	if e.n == 0 && (e.epoch < 0 || h.ProducerEpoch >= e.epoch) {
		return nil // unknown producer, or only a marker seen: accepted (KIP-360)
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return fmt.Errorf("producer id %d epoch %d is older than the current epoch %d (fenced): %w",
			h.ProducerID, h.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	case h.ProducerEpoch > e.epoch:
		if firstSeq != 0 {
			return fmt.Errorf("producer id %d: new epoch %d (was %d) must start at sequence 0, got %d: %w",
				h.ProducerID, h.ProducerEpoch, e.epoch, firstSeq, kerr.OutOfOrderSequenceNumber)
		}
		return nil
	}
	if _, ok := e.findDuplicate(firstSeq, lastSeq); ok {
		return nil
	}
	if want := nextSequence(e.last().lastSeq); firstSeq != want {
		return fmt.Errorf("producer id %d epoch %d: base sequence %d, expected %d: %w",
			h.ProducerID, h.ProducerEpoch, firstSeq, want, kerr.OutOfOrderSequenceNumber)
	}
	return nil
}

// recordLocked notes an appended batch of producer id (mu held): a newer
// epoch restarts the entry; an older one (a follower replaying a log in
// which a fenced producer still wrote) is ignored.
func (ps *producerState) recordLocked(id int64, epoch int16, m batchMeta) {
	e := ps.producers[id]
	if e == nil {
		if ps.producers == nil {
			ps.producers = make(map[int64]*producerEntry)
		}
		e = newProducerEntry(epoch)
		ps.producers[id] = e
	}
	switch {
	case epoch > e.epoch:
		e.reset(epoch)
	case epoch < e.epoch:
		return
	}
	e.push(m)
	e.lastAt = max(e.lastAt, m.lastOffset)
}

// recordHeaderLocked records h if it carries a producer id, and opens its transaction if it
// is transactional (mu held). Control batches go to markerLocked.
func (ps *producerState) recordHeaderLocked(h records.Header) {
	if h.ProducerID < 0 || h.ProducerEpoch < 0 || h.IsControl() {
		return
	}
	if h.IsTransactional() {
		// also the group coordinator's transactional offset commits (no sequence)
		ps.txn.beginLocked(h.ProducerID, h.BaseOffset)
	}
	if h.BaseSequence < 0 {
		return
	}
	ps.recordLocked(h.ProducerID, h.ProducerEpoch, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: lastSequence(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), maxTimestamp: h.MaxTimestamp,
	})
}

// applyFollower records the batches of blob (already appended by a
// follower, offsets as on the leader). Called under roleMu.
// An ABORT marker's entry goes to the log's .txnindex; failing to write it is a storage
// error (the log is poisoned).
func (r *Replica) applyFollowerProducers(blob []byte) error {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var ierr error
	for b := blob; len(b) > 0; {
		h, err := records.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return ierr // cannot happen: the log validated blob
		}
		if h.IsControl() {
			if m, err := records.ParseMarker(b[:h.Size()]); err == nil {
				if err := ps.markerLocked(h.ProducerID, h.ProducerEpoch, m, h.BaseOffset, h.MaxTimestamp, r.log); err != nil && ierr == nil {
					ierr = fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
				}
			}
		} else {
			ps.recordHeaderLocked(h)
		}
		b = b[h.Size():]
	}
	return ierr
}

// headerScanner is implemented by *log.Log (the in-memory test log lacks it:
// then the state is not rebuilt from the log).
type headerScanner interface {
	ForEachBatchHeader(from int64, fn func(h records.Header) error) error
}

// rebuildProducers replaces the producer state with one rebuilt from every
// batch header in the log, from the log start to the LEO. Called by
// newReplica (log recovery) and after every truncation (under roleMu), so
// the state never holds a batch the log lost. Cost: one pread per 64 KiB of
// small batches or per large batch; truncation is rare.
func (r *Replica) rebuildProducers() error {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	clear(ps.producers)
	ps.txn.reset()
	return r.replayFromLogStartLocked()
}

// replayLocked applies every batch of the log from offset from (inclusive, a batch boundary)
// to the LEO to the producer state (ps.mu held); on failure the state is emptied.
func (r *Replica) replayLocked(from int64) error {
	return r.replaySkippingLocked(from, -1, nil)
}

// replaySkippingLocked is replayLocked, skipping the batches and markers below skipBelow of
// the producers in skip (a log-start snapshot's: their state there already has them).
func (r *Replica) replaySkippingLocked(from, skipBelow int64, skip map[int64]*producerEntry) error {
	ps := &r.producers
	sc, ok := r.log.(headerScanner)
	if !ok {
		return nil
	}
	if ps.producers == nil {
		ps.producers = make(map[int64]*producerEntry)
	}
	err := sc.ForEachBatchHeader(from, func(h records.Header) error {
		if h.BaseOffset < skipBelow && skip[h.ProducerID] != nil {
			return nil
		}
		if !h.IsControl() {
			ps.recordHeaderLocked(h)
			return nil
		}
		m, err := r.readMarker(h)
		if err != nil {
			return fmt.Errorf("control batch at offset %d: %w", h.BaseOffset, err)
		}
		_ = ps.markerLocked(h.ProducerID, h.ProducerEpoch, m, h.BaseOffset, h.MaxTimestamp, nil) // the log's .txnindex has it
		return nil
	})
	if err != nil {
		clear(ps.producers)
		ps.txn.reset()
		if errors.Is(err, log.ErrClosed) {
			return err
		}
		return fmt.Errorf("partition %s-%d: rebuild idempotent producer state: %w", r.topic, r.partition, err)
	}
	return nil
}

// clearProducers drops the whole producer state (the log was emptied), its log-start
// snapshot included.
func (r *Replica) clearProducers() {
	r.producers.mu.Lock()
	clear(r.producers.producers)
	r.producers.txn.reset()
	r.producers.logStartSnap = logStartSnap{}
	r.producers.mu.Unlock()
	r.removeLogStartSnapshot()
}
