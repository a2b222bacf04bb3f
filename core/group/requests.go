package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The Coordinator's requests: each runs the Machine under the coordinator's lock (call) and,
// for JoinGroup and SyncGroup, parks until its callback is run; the blocking forms wait for
// that callback, the Async forms return at once and run their callback when the answer is
// ready (on the caller's goroutine when it comes at once).

// Forget drops the parked request t of groupID (its caller gave up, its connection
// closed): its callback will not run. The member stays in the rebalance, as Kafka keeps a
// member whose connection closed while its JoinGroup waited.
func (c *Coordinator) Forget(groupID string, t Ticket) {
	if t == 0 {
		return
	}
	c.call(func(m *Machine, _ int64) {
		delete(c.mu.waiters, t)
		m.Cancel(groupID, t)
	})
}

// JoinAsync handles a JoinGroup: done gets the answer, at once or when the rebalance
// completes. The ticket names the parked request for Forget (0: answered already).
func (c *Coordinator) JoinAsync(req JoinRequest, done func(JoinResult)) Ticket {
	t := c.ticket(func(r Reply) { done(*r.Join) })
	var res JoinResult
	var parked bool
	c.call(func(m *Machine, now int64) {
		res, parked = m.Join(now, req, t)
		if !parked {
			delete(c.mu.waiters, t)
		}
	})
	if !parked {
		done(res)
		return 0
	}
	return t
}

// Join handles a JoinGroup, blocking while the rebalance runs. The error is ctx's when the
// caller gave up (the answer is then moot: the connection is going away).
func (c *Coordinator) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	ch := make(chan JoinResult, 1)
	t := c.JoinAsync(req, func(r JoinResult) { ch <- r })
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		c.Forget(req.Group, t)
		return JoinResult{}, ctx.Err()
	case <-c.ctx.Done():
		c.Forget(req.Group, t)
		return JoinResult{Err: kerr.NotCoordinator, MemberID: req.MemberID}, nil
	}
}

// SyncAsync handles a SyncGroup: done gets the answer, at once or once the leader's
// assignment is stored (or the rebalance fails). The leader's request writes the group
// metadata itself, with acks=all. The ticket names the parked request for Forget (0:
// answered already).
func (c *Coordinator) SyncAsync(req SyncRequest, done func(SyncResult)) Ticket {
	t := c.ticket(func(r Reply) { done(*r.Sync) })
	var res SyncResult
	var parked bool
	var wr *write
	var store *GroupStore
	c.call(func(m *Machine, now int64) {
		res, parked, store = m.Sync(now, req, t)
		if !parked {
			delete(c.mu.waiters, t)
		}
		if store == nil {
			return
		}
		var err error
		if wr, err = c.appendLocked(store.Partition, store.Records()); err != nil {
			m.SyncStored(now, store, groupStoreError(err))
		}
	})
	if !parked {
		done(res)
		return 0
	}
	if wr != nil {
		c.await(wr, func(_ int64, err error) {
			err = groupStoreError(err)
			c.call(func(m *Machine, now int64) { m.SyncStored(now, store, err) })
		})
	}
	return t
}

// Sync handles a SyncGroup, blocking until the leader's assignment is stored (or the
// rebalance fails).
func (c *Coordinator) Sync(ctx context.Context, req SyncRequest) (SyncResult, error) {
	ch := make(chan SyncResult, 1)
	t := c.SyncAsync(req, func(r SyncResult) { ch <- r })
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		c.Forget(req.Group, t)
		return SyncResult{}, ctx.Err()
	case <-c.ctx.Done():
		c.Forget(req.Group, t)
		return SyncResult{Err: kerr.NotCoordinator}, nil
	}
}

// Heartbeat handles a Heartbeat.
func (c *Coordinator) Heartbeat(groupID, memberID, instanceID string, generation int32) error {
	var err error
	c.call(func(m *Machine, now int64) { err = m.Heartbeat(now, groupID, memberID, instanceID, generation) })
	return err
}

// Leave handles a LeaveGroup (see Machine.Leave).
func (c *Coordinator) Leave(groupID string, members []LeaveMember) (error, []error) {
	var top error
	var per []error
	c.call(func(m *Machine, now int64) { top, per = m.Leave(now, groupID, members) })
	return top, per
}

// CommitAsync handles the group side of an OffsetCommit and writes offs (already validated
// per partition by the caller) with acks=all; done gets the outcome, which applies to every
// partition. As Kafka's handleCommitOffsets under the group lock, the validation and the
// append to the group's partition happen in one hold of the lock, in the leadership the
// partition was loaded for: a leadership change cannot come in between, and a reload that
// follows reads the record. The offsets are applied once the append is acknowledged.
func (c *Coordinator) CommitAsync(req CommitRequest, offs map[TP]Committed, done func(error)) {
	var err error
	var wr *write
	c.call(func(m *Machine, now int64) {
		if err = m.CheckCommit(now, req); err != nil || len(offs) == 0 {
			return
		}
		if wr, err = c.appendLocked(m.Partition(req.Group), OffsetRecords(req.Group, offs)); err == nil {
			m.CommitPending(req.Group, offs)
		}
	})
	if wr == nil {
		done(commitError(err))
		return
	}
	if h := c.hooks.commitUnlocked; h != nil {
		h()
	}
	c.await(wr, func(base int64, err error) {
		c.call(func(m *Machine, _ int64) { m.CommitStored(req.Group, offs, base, err) })
		done(commitError(err))
	})
}

// Commit is CommitAsync, blocking until the outcome or until ctx ends (then ctx's error:
// the write goes on, the answer is moot).
func (c *Coordinator) Commit(ctx context.Context, req CommitRequest, offs map[TP]Committed) error {
	ch := make(chan error, 1)
	c.CommitAsync(req, offs, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Committed returns the committed offsets of groupID for tps (nil = all). While the
// broker's leadership of the group's partition differs from the one its groups were loaded
// for (the watcher has not seen the change yet), it answers NOT_COORDINATOR, or
// COORDINATOR_LOAD_IN_PROGRESS when the broker leads again in a later leader epoch: the
// loaded state may lack what another coordinator committed meanwhile.
func (c *Coordinator) Committed(groupID string, tps []TP) (map[TP]Committed, error) {
	var out map[TP]Committed
	var err error
	c.call(func(m *Machine, _ int64) {
		if err = m.Check(groupID); err == nil {
			err = c.currentLocked(m.Partition(groupID))
		}
		if err == nil {
			out, err = m.Committed(groupID, tps)
		}
	})
	return out, err
}

// Check returns NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / INVALID_GROUP_ID, or nil.
func (c *Coordinator) Check(groupID string) error {
	var err error
	c.call(func(m *Machine, _ int64) { err = m.Check(groupID) })
	return err
}

// Describe handles DescribeGroups for one group.
func (c *Coordinator) Describe(groupID string) (Description, error) {
	var d Description
	var err error
	c.call(func(m *Machine, _ int64) { d, err = m.Describe(groupID) })
	return d, err
}

// List handles ListGroups (the groups of the partitions this broker leads and has loaded);
// loading is true while some partition is still loading (COORDINATOR_LOAD_IN_PROGRESS).
func (c *Coordinator) List() (groups []Listing, loading bool) {
	c.call(func(m *Machine, _ int64) {
		groups = m.List()
		for _, p := range m.OwnedPartitions() {
			if m.Loading(p) {
				loading = true
			}
		}
	})
	return groups, loading
}

// Delete handles DeleteGroups for one group: the group goes, and its tombstones are written
// with acks=all.
func (c *Coordinator) Delete(ctx context.Context, groupID string) error {
	var wr *write
	var err error
	c.call(func(m *Machine, _ int64) {
		var p int32
		var recs []Record
		if p, recs, err = m.Delete(groupID); err == nil {
			wr, err = c.appendLocked(p, recs)
		}
	})
	if err != nil {
		return commitError(err)
	}
	ch := make(chan error, 1)
	c.await(wr, func(_ int64, err error) { ch <- commitError(err) })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns groupID's rebalance counters if this coordinator holds the group.
func (c *Coordinator) Stats(groupID string) (Stats, bool) {
	var st Stats
	var ok bool
	c.call(func(m *Machine, _ int64) { st, ok = m.Stats(groupID) })
	return st, ok
}
