package target

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/workloads/spec"
)

// Reassign starts reassign fault f on the embedded cluster (see faultreassign.go): one
// AlterPartitionReassignments of every partition of topic hosted by the fault's target
// broker (of the internal topic partition alone when the target is leader-of: or
// follower-of: one), after the throttle configs when throttle > 0 (as kafka-reassign-partitions.sh
// --throttle: leader.replication.throttled.replicas on each moving partition's current
// replicas, follower.replication.throttled.replicas on its new ones, both rates on every
// broker involved). The returned wait follows the controller's changes until every moved
// partition's reassignment completed, then removes the throttle configs.
func (e *embedded) Reassign(ctx context.Context, topic string, f spec.Fault, throttle int64) (string, func(context.Context) (map[string]time.Duration, error), error) {
	pt, err := spec.ParseFaultTarget("target", f, len(e.c.BrokerIDs()), topic, int(^uint(0)>>1), int(^uint(0)>>1))
	if err != nil {
		return "", nil, err
	}
	if pt.IsGroups() {
		return "", nil, fmt.Errorf("reassign: target %q: want one broker", f.Target)
	}
	from, err := e.resolve(pt.Ref, true)
	if err != nil {
		return "", nil, err
	}
	// leader-of:/follower-of: a partition of an internal topic moves that partition alone:
	// __transaction_state-N's leader replica moved off is a transaction coordinator move,
	// __consumer_offsets-N's a group coordinator move.
	only := int32(-1)
	if r := pt.Ref; (r.Role == "leader" || r.Role == "follower") && (r.Topic == spec.TxnStateTopic || r.Topic == spec.OffsetsTopic) {
		topic, only = r.Topic, int32(r.Partition)
	}
	ctrl := e.c.Controller()
	parts, ok := ctrl.Partitions(topic)
	if !ok {
		return "", nil, fmt.Errorf("reassign: no topic %s", topic)
	}
	brokers := e.c.BrokerIDs()
	var reqs []controller.Reassignment
	var cur [][]int32
	for _, st := range parts {
		if !slices.Contains(st.Replicas, from) || st.Reassigning() || (only >= 0 && st.Partition != only) {
			continue
		}
		to := f.To
		if to < 0 {
			to = -1
			for _, b := range brokers {
				if !slices.Contains(st.Replicas, b) {
					to = b
					break
				}
			}
			if to < 0 {
				continue // every broker hosts it
			}
		} else if slices.Contains(st.Replicas, to) {
			continue // already there
		}
		target := slices.Clone(st.Replicas)
		if f.Add {
			target = append(target, to)
		} else {
			target[slices.Index(target, from)] = to
		}
		reqs = append(reqs, controller.Reassignment{Topic: topic, Partition: st.Partition, Replicas: target})
		cur = append(cur, slices.Clone(st.Replicas))
	}
	desc := "broker=" + strconv.Itoa(int(from))
	if len(reqs) == 0 {
		return desc, nil, fmt.Errorf("reassign: no partition of %s to move from broker %d (to %d)", topic, from, f.To)
	}
	var moved []string
	for _, r := range reqs {
		moved = append(moved, fmt.Sprintf("%s-%d->%v", topic, r.Partition, r.Replicas))
	}
	desc += " " + strings.Join(moved, " ")
	var involved []int32
	if throttle > 0 {
		if involved, err = e.setThrottle(topic, reqs, cur, throttle); err != nil {
			return desc, nil, fmt.Errorf("reassign: setting the throttle: %w", err)
		}
	}

	// Follow the partitions' states from before the request, so no completion is missed.
	var mu sync.Mutex
	done := map[int32]time.Time{}
	wake := make(chan struct{}, 1)
	note := func(st controller.PartitionState) {
		if st.Topic != topic || st.Reassigning() {
			return
		}
		mu.Lock()
		if _, seen := done[st.Partition]; !seen && slices.ContainsFunc(reqs, func(r controller.Reassignment) bool { return r.Partition == st.Partition }) {
			done[st.Partition] = time.Now()
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	start := time.Now()
	var cancels []func()
	for _, r := range reqs {
		for _, b := range r.Replicas {
			if !slices.Contains(involved, b) {
				involved = append(involved, b)
			}
		}
	}
	subscribed := map[int32]bool{}
	for _, b := range append(slices.Clone(involved), from) {
		if !subscribed[b] {
			subscribed[b] = true
			cancels = append(cancels, ctrl.Subscribe(b, func(u controller.Update) {
				if u.Partition != nil && isStarted(u.Partition, reqs) {
					note(*u.Partition)
				}
			}))
		}
	}
	stop := func() {
		for _, c := range cancels {
			c()
		}
	}
	for i, err := range ctrl.AlterPartitionReassignments(reqs, true) {
		if err != nil {
			stop()
			return desc, nil, fmt.Errorf("reassign %s-%d to %v: %w", topic, reqs[i].Partition, reqs[i].Replicas, err)
		}
	}
	for _, r := range reqs { // completed at once, or before the subscriptions delivered
		if st, ok := ctrl.Partition(topic, r.Partition); ok && slices.Equal(st.Replicas, r.Replicas) && !st.Reassigning() {
			note(st)
		}
	}
	catchUp := func() map[string]time.Duration {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]time.Duration, len(done))
		for p, t := range done {
			out[topic+"-"+strconv.Itoa(int(p))] = t.Sub(start)
		}
		return out
	}
	wait := func(ctx context.Context) (map[string]time.Duration, error) {
		defer stop()
		for {
			mu.Lock()
			n := len(done)
			mu.Unlock()
			if n == len(reqs) {
				break
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return catchUp(), fmt.Errorf("reassign: %d of %d partitions still catching up when the measurement ended", len(reqs)-n, len(reqs))
			}
		}
		if throttle > 0 {
			if err := e.clearThrottle(topic, involved); err != nil {
				return catchUp(), fmt.Errorf("reassign: clearing the throttle: %w", err)
			}
		}
		return catchUp(), nil
	}
	return desc, wait, nil
}

// isStarted reports whether st is a state of a reassigned partition from after the request:
// its replicas are the target, or the union of the request (in progress).
func isStarted(st *controller.PartitionState, reqs []controller.Reassignment) bool {
	for _, r := range reqs {
		if r.Partition == st.Partition {
			return st.Reassigning() || slices.Equal(st.Replicas, r.Replicas)
		}
	}
	return false
}

// setThrottle sets kafka-reassign-partitions.sh's throttle for reqs (cur: each one's current
// replicas) and returns the brokers whose rates it set.
func (e *embedded) setThrottle(topic string, reqs []controller.Reassignment, cur [][]int32, rate int64) ([]int32, error) {
	ctrl := e.c.Controller()
	var leader, follower []string
	var brokers []int32
	for i, r := range reqs {
		for _, b := range cur[i] {
			leader = append(leader, fmt.Sprintf("%d:%d", r.Partition, b))
		}
		for _, b := range r.Replicas {
			if !slices.Contains(cur[i], b) {
				follower = append(follower, fmt.Sprintf("%d:%d", r.Partition, b))
			}
		}
		for _, b := range append(slices.Clone(cur[i]), r.Replicas...) {
			if !slices.Contains(brokers, b) {
				brokers = append(brokers, b)
			}
		}
	}
	set := map[string]string{controller.ConfigLeaderThrottledReplicas: strings.Join(leader, ",")}
	if len(follower) > 0 {
		set[controller.ConfigFollowerThrottledReplicas] = strings.Join(follower, ",")
	}
	if err := ctrl.ChangeTopicConfig(topic, controller.ConfigChange{Set: set}); err != nil {
		return nil, err
	}
	v := strconv.FormatInt(rate, 10)
	slices.Sort(brokers)
	for _, b := range brokers {
		rates := map[string]string{"leader.replication.throttled.rate": v, "follower.replication.throttled.rate": v}
		if err := ctrl.ChangeBrokerConfig(strconv.Itoa(int(b)), controller.ConfigChange{Set: rates}); err != nil {
			return nil, err
		}
	}
	return brokers, nil
}

// clearThrottle removes the throttle configs setThrottle set.
func (e *embedded) clearThrottle(topic string, brokers []int32) error {
	ctrl := e.c.Controller()
	err := ctrl.ChangeTopicConfig(topic, controller.ConfigChange{Delete: []string{controller.ConfigLeaderThrottledReplicas, controller.ConfigFollowerThrottledReplicas}})
	for _, b := range brokers {
		cfg := ctrl.BrokerConfigs(strconv.Itoa(int(b)))
		del := slices.DeleteFunc(slices.Collect(maps.Keys(cfg)), func(k string) bool { return !strings.HasSuffix(k, ".replication.throttled.rate") })
		if len(del) == 0 {
			continue
		}
		if e2 := ctrl.ChangeBrokerConfig(strconv.Itoa(int(b)), controller.ConfigChange{Delete: del}); err == nil {
			err = e2
		}
	}
	return err
}
