package partition

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/records"
)

// This file is the transactional half of the producer state (Kafka's ProducerStateManager
// ongoingTxns / unreplicatedTxns and the aborted-transactions index, TransactionIndex):
//
//   - a transactional data batch of a producer with no open transaction opens one at the
//     batch's first offset;
//   - a control batch (COMMIT or ABORT marker, records/control.go) closes it; an ABORT adds
//     (producer id, first offset, marker offset, LSO) to the .txnindex of the marker's
//     segment (core/log), before the transaction closes;
//   - a closed transaction stays "unreplicated" until the HW passes its marker;
//   - LSO = min(HW, first offset of every open or unreplicated transaction): the first
//     offset read_committed consumers cannot read (exclusive, like the HW). LSO <= HW; on a
//     leader it never decreases, since the HW does not and a new transaction starts at or
//     past the LEO.
//
// The leader applies it at append time (appendIdempotent, AppendMarkerAsLeader), followers
// from the batches they append, and every replica rebuilds it from the log when it is opened
// and after a truncation (rebuildProducers: the log is the durable copy; markers are read
// back from their batches), so a new leader's LSO is its predecessor's; the .txnindex files
// are the log's (rebuilt by its Open, cut by its truncation), so its aborted list is too.
// Markers carry the producer epoch they end the transaction in (a bump on re-initialisation
// fences the zombie's later batches: INVALID_PRODUCER_EPOCH) and the coordinator epoch
// (a marker from an older coordinator is TRANSACTION_COORDINATOR_FENCED).

// abortIndex is where the aborted transactions go: the log's .txnindex files (*log.Log).
type abortIndex interface {
	AppendAbortedTxn(a log.AbortedTxn) error
	AppendAbortedTxns(dst []log.AbortedTxn, from, upTo int64) ([]log.AbortedTxn, error)
}

// AbortedTxn is one aborted transaction of a partition: its producer id, the offset of its
// first record and the offset of its ABORT marker (both inclusive), as Fetch's
// AbortedTransactions and Kafka's .txnindex entries give them.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnSpan is a closed transaction the HW has not passed yet.
type txnSpan struct{ first, marker int64 }

// txnState is guarded by producerState.mu, except unstable (an atomic, read lock-free).
type txnState struct {
	ongoing      map[int64]int64 // producer id -> first offset (inclusive) of its open transaction
	unreplicated []txnSpan       // ascending marker offset
	unstable     atomic.Int32    // len(ongoing) + len(unreplicated)
}

func (t *txnState) count() {
	t.unstable.Store(int32(len(t.ongoing) + len(t.unreplicated)))
}

func (t *txnState) reset() {
	clear(t.ongoing)
	t.unreplicated = nil
	t.count()
}

// beginLocked opens producer id's transaction at first unless one is open.
func (t *txnState) beginLocked(id, first int64) {
	if _, ok := t.ongoing[id]; ok {
		return
	}
	if t.ongoing == nil {
		t.ongoing = map[int64]int64{}
	}
	t.ongoing[id] = first
	t.count()
}

// endLocked closes producer id's open transaction (if any) with the marker at offset marker.
// An ABORT is first written to idx (the log's .txnindex; nil when replaying the log, whose
// index has it already), so that the transaction's records never reach the LSO before the
// index lists them; the transaction closes even when that write fails (the log is poisoned).
func (t *txnState) endLocked(id int64, commit bool, marker int64, idx abortIndex) error {
	first, ok := t.ongoing[id]
	if !ok {
		return nil // a marker for a transaction with no data here
	}
	delete(t.ongoing, id)
	var err error
	if !commit && idx != nil {
		lso := marker + 1 // Kafka's lastStableOffset(completedTxn): the earliest other open transaction
		for _, f := range t.ongoing {
			lso = min(lso, f)
		}
		err = idx.AppendAbortedTxn(log.AbortedTxn{ProducerID: id, FirstOffset: first, LastOffset: marker, LastStableOffset: lso})
	}
	t.unreplicated = append(t.unreplicated, txnSpan{first: first, marker: marker})
	t.count()
	return err
}

// lsoLocked drops the closed transactions the HW passed and returns the LSO for hw.
func (t *txnState) lsoLocked(hw int64) int64 {
	i := 0
	for i < len(t.unreplicated) && t.unreplicated[i].marker < hw {
		i++
	}
	if i > 0 {
		t.unreplicated = append(t.unreplicated[:0], t.unreplicated[i:]...)
		t.count()
	}
	lso := hw
	for _, f := range t.ongoing {
		lso = min(lso, f)
	}
	for _, s := range t.unreplicated {
		lso = min(lso, s.first)
	}
	return lso
}

// LSO returns the last stable offset (exclusive): the first offset of the earliest open
// transaction, or of a closed one whose marker the HW has not passed, or the HW if none.
// Lock-free when no transaction is open. Safe for concurrent use.
func (r *Replica) LSO() int64 {
	hw := r.hw.Load()
	if r.producers.txn.unstable.Load() == 0 {
		return hw
	}
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.txn.lsoLocked(hw)
}

// AppendAbortedTxns appends to dst the aborted transactions a read_committed fetch of
// [from, upTo) must know: those whose marker is at or past from and whose first offset is
// below upTo (Kafka's collectAbortedTransactions), read from the log's .txnindex files.
// Reads and allocates only when the log has some past from. Safe for concurrent use.
func (r *Replica) AppendAbortedTxns(dst []AbortedTxn, from, upTo int64) ([]AbortedTxn, error) {
	ab, err := r.log.AppendAbortedTxns(nil, from, upTo)
	if err != nil {
		return dst, fmt.Errorf("partition %s-%d: aborted transactions of [%d, %d): %w", r.topic, r.partition, from, upTo, err)
	}
	for _, a := range ab {
		dst = append(dst, AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
	}
	return dst, nil
}

// OpenTxns returns producer id -> first offset of its open transaction on this replica
// (a copy, for tools and tests).
func (r *Replica) OpenTxns() map[int64]int64 {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make(map[int64]int64, len(ps.txn.ongoing))
	for k, v := range ps.txn.ongoing {
		out[k] = v
	}
	return out
}

// markerLocked applies a marker of producer id at offset: the epoch moves up (a bump
// forgets the retained batches: the next epoch starts at sequence 0), the coordinator epoch
// is recorded, ts (the marker's timestamp, ms) becomes the producer's last timestamp
// (expire.go) and the open transaction closes (mu held). An ABORT goes to idx (see endLocked).
func (ps *producerState) markerLocked(id int64, epoch int16, m records.Marker, offset, ts int64, idx abortIndex) error {
	if id < 0 {
		return nil
	}
	e := ps.producers[id]
	if e == nil {
		if ps.producers == nil {
			ps.producers = make(map[int64]*producerEntry)
		}
		e = newProducerEntry(-1)
		ps.producers[id] = e
	}
	if epoch > e.epoch {
		e.reset(epoch)
	}
	e.coordEpoch = max(e.coordEpoch, m.CoordinatorEpoch)
	e.lastAt = max(e.lastAt, offset)
	e.lastTs = ts
	return ps.txn.endLocked(id, m.Commit(), offset, idx)
}

// AppendMarkerAsLeader appends a COMMIT (commit) or ABORT marker of producer id / epoch
// written by the transaction coordinator of epoch coordinatorEpoch (Kafka's
// WriteTxnMarkers), as leader, with acks=all's min.insync.replicas check; the caller waits
// for the HW with WaitForHW / CheckHW. Errors: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
// INVALID_PRODUCER_EPOCH when epoch is older than the producer's, and
// TRANSACTION_COORDINATOR_FENCED when coordinatorEpoch is older than the last marker's.
func (r *Replica) AppendMarkerAsLeader(id int64, epoch int16, coordinatorEpoch int32, commit bool, nowMs int64) (log.AppendInfo, error) {
	s, ok := r.enterLeader()
	if !ok {
		return log.AppendInfo{}, r.errNotLeader(s)
	}
	defer s.exit()
	if len(s.st.ISR) < r.effectiveMinISR(s) {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: ISR %v has %d members, min.insync.replicas is %d: %w",
			r.topic, r.partition, s.st.ISR, len(s.st.ISR), r.effectiveMinISR(s), kerr.NotEnoughReplicas)
	}
	if id < 0 || epoch < 0 {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: marker for producer id %d epoch %d (both must be >= 0): %w",
			r.topic, r.partition, id, epoch, kerr.InvalidRequest)
	}
	ps := &r.producers
	e := ps.appendLock(id)
	defer e.appendMu.Unlock()
	ps.mu.Lock()
	var err error
	switch {
	case ps.producers[id] != e:
		err = fmt.Errorf("producer state rebuilt or expired during the marker append of producer id %d: %w", id, kerr.NotLeaderForPartition)
	case epoch < e.epoch:
		err = fmt.Errorf("marker of producer id %d epoch %d is older than the current epoch %d: %w", id, epoch, e.epoch, kerr.InvalidProducerEpoch)
	case coordinatorEpoch < e.coordEpoch:
		err = fmt.Errorf("marker of producer id %d from coordinator epoch %d, last was %d: %w", id, coordinatorEpoch, e.coordEpoch, kerr.TransactionCoordinatorFenced)
	}
	ps.mu.Unlock()
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	blob := records.AppendControlBatch(nil, id, epoch, coordinatorEpoch, commit, nowMs)
	appendNs := r.quietNow(s)
	info, err := r.log.Append(blob, true, s.st.LeaderEpoch)
	if err != nil {
		return info, err
	}
	typ := records.ControlAbort
	if commit {
		typ = records.ControlCommit
	}
	ps.mu.Lock()
	err = ps.markerLocked(id, epoch, records.Marker{Type: typ, CoordinatorEpoch: coordinatorEpoch}, info.FirstOffset, nowMs, r.log)
	ps.mu.Unlock()
	info.LeaderEpoch = s.st.LeaderEpoch
	r.settleQuiet(s, appendNs)
	r.leoSig.notify()
	if err != nil {
		return info, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	r.maybeAdvanceHW(s)
	return info, nil
}

// markerReader reads a control batch back from the log (rebuildProducers).
func (r *Replica) readMarker(h records.Header) (records.Marker, error) {
	s, err := r.log.Read(h.BaseOffset, h.NextOffset(), h.Size(), true)
	if err != nil {
		return records.Marker{}, err
	}
	buf, err := s.ReadAll(nil)
	s.Release()
	if err != nil {
		return records.Marker{}, err
	}
	return records.ParseMarker(buf)
}

// AppendCoordinatorTxn appends blob, one transactional batch a coordinator writes for a
// producer (the group coordinator's TxnOffsetCommit records: Kafka's AppendOrigin.COORDINATOR),
// as leader: no sequence check (its base sequence may be -1), the producer epoch must not be
// older than the producer's (INVALID_PRODUCER_EPOCH), and the producer's transaction opens
// here. acks=all's min.insync.replicas check applies with requiredAcks -1.
func (r *Replica) AppendCoordinatorTxn(blob []byte, requiredAcks int16) (log.AppendInfo, error) {
	s, ok := r.enterLeader()
	if !ok {
		return log.AppendInfo{}, r.errNotLeader(s)
	}
	defer s.exit()
	if requiredAcks == -1 && len(s.st.ISR) < r.effectiveMinISR(s) {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: ISR %v has %d members, min.insync.replicas is %d: %w",
			r.topic, r.partition, s.st.ISR, len(s.st.ISR), r.effectiveMinISR(s), kerr.NotEnoughReplicas)
	}
	h, err := records.ParseHeader(blob)
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	if h.Size() != len(blob) || !h.IsTransactional() || h.IsControl() || h.ProducerID < 0 || h.ProducerEpoch < 0 {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: a coordinator's transactional append must be one transactional data batch with a producer id and epoch: %w",
			r.topic, r.partition, kerr.InvalidRecord)
	}
	ps := &r.producers
	e := ps.appendLock(h.ProducerID)
	defer e.appendMu.Unlock()
	ps.mu.Lock()
	switch {
	case ps.producers[h.ProducerID] != e:
		err = fmt.Errorf("producer state rebuilt during the append of producer id %d: %w", h.ProducerID, kerr.NotLeaderForPartition)
	case h.ProducerEpoch < e.epoch:
		err = fmt.Errorf("producer id %d epoch %d is older than the current epoch %d (fenced): %w", h.ProducerID, h.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	ps.mu.Unlock()
	if err != nil {
		return log.AppendInfo{}, fmt.Errorf("partition %s-%d: %w", r.topic, r.partition, err)
	}
	appendNs := r.quietNow(s)
	info, err := r.log.Append(blob, true, s.st.LeaderEpoch)
	if err != nil {
		return info, err
	}
	ps.mu.Lock()
	if h.ProducerEpoch > e.epoch {
		e.reset(h.ProducerEpoch)
	}
	ps.txn.beginLocked(h.ProducerID, info.FirstOffset)
	ps.mu.Unlock()
	info.LeaderEpoch = s.st.LeaderEpoch
	r.settleQuiet(s, appendNs)
	r.leoSig.notify()
	r.maybeAdvanceHW(s)
	return info, nil
}
