package partition

// Producer-id expiration (producer.id.expiration.ms, KIP-854; Kafka's
// ProducerStateManager.removeExpiredProducers): a replica forgets a producer that has no
// transaction open on it and whose last batch or marker is at least producer.id.expiration.ms
// old, by that batch's max timestamp or the marker's timestamp (Kafka's lastTimestamp, which
// for a batch is the client's CreateTime unless the topic uses LogAppendTime). Without it the
// state of every producer that ever wrote grows for good: each benchmark run's idempotent
// clients are new producer ids.
//
// A forgotten producer is unknown: its next batch is accepted whatever its sequence
// (KIP-360), so a retry of a batch it sent before it went idle is no longer recognised as a
// duplicate, as in Kafka. Leader and followers expire on their own clocks; a producer one
// replica has forgotten and another has not differs only in that answer.
//
// A producer whose last timestamp is unknown (-1: a client that sent none, or a snapshot of
// an older build that did not record it for a producer seen in a marker only) is timed from
// the first check that sees it. A producer in the middle of a leader append (its appendMu
// held) is kept until the next check; an append that took its entry before the expiration
// removed it finds the entry gone and answers NOT_LEADER_OR_FOLLOWER, which clients retry.
//
// The log-start snapshot (logstartsnap.go) is not rewritten when a producer expires: a rebuild
// from it before the log start next moves brings such a producer back until the next check.

// ExpireProducers forgets the producers idle for expirationMs or longer at nowMs (see above)
// and returns how many. Safe for concurrent use, on leaders and followers.
func (r *Replica) ExpireProducers(nowMs, expirationMs int64) int {
	ps := &r.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for id, e := range ps.producers {
		if _, open := ps.txn.ongoing[id]; open {
			continue
		}
		if e.lastTs < 0 {
			e.lastTs = nowMs // unknown: timed from now
			continue
		}
		if nowMs-e.lastTs < expirationMs {
			continue
		}
		// appendMu comes before ps.mu in the lock order: only try it.
		if !e.appendMu.TryLock() {
			continue
		}
		delete(ps.producers, id)
		e.appendMu.Unlock()
		n++
	}
	return n
}
