package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/netfetch"
)

// placeOn creates topic (one partition, RF 3, min.insync.replicas 2) and, through kadm's
// AlterPartitionAssignments, puts it on replicas if the placement chose others; it returns
// a waiter on the partition's state.
func placeOn(t *testing.T, c *cluster.Cluster, adm *kadm.Client, topic string, replicas []int32) func(string, func(controller.PartitionState) bool) controller.PartitionState {
	t.Helper()
	if err := c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	wait := clustertest.WatchPartition(t, c, replicas[1], topic, 0)
	if st, _ := c.Controller().Partition(topic, 0); !slices.Equal(st.Replicas, replicas) {
		reassignKadm(t, adm, topic, replicas)
		wait("placed on "+fmt.Sprint(replicas), func(s controller.PartitionState) bool { return !s.Reassigning() && slices.Equal(s.Replicas, replicas) })
	}
	return wait
}

func reassignKadm(t *testing.T, adm *kadm.Client, topic string, replicas []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, replicas)
	resp, err := adm.AlterPartitionAssignments(clustertest.Context(t), req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("AlterPartitionAssignments %s-0 -> %v: %v", topic, replicas, err)
	}
}

// TestReassignUnderLoad moves a partition from brokers [0 1 2] to [1 2 3] with kadm while
// acks=all producers write to it: broker 3 catches up and joins the ISR, the leader (0) is
// removed, leadership moves within the target, broker 0 deletes its replica; no acknowledged
// record is lost and the final replicas hold identical logs.
func TestReassignUnderLoad(t *testing.T) {
	c := clustertest.Start(t, 4, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	const topic = "moved"
	wait := placeOn(t, c, adm, topic, []int32{0, 1, 2})
	if st := wait("led by 0", func(s controller.PartitionState) bool { return s.Leader >= 0 }); st.Leader != 0 {
		if _, err := c.Controller().ElectLeader(topic, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	cl := clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(25*time.Second))
	acks := clustertest.Produce(t, cl, topic, "pre", 500)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var mu sync.Mutex
	var during []clustertest.Ack
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("during-%05d", i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Errorf("produce %s during the move: %v", r.Value, err)
				return
			}
			mu.Lock()
			during = append(during, clustertest.Ack{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			mu.Unlock()
			if i == 20 {
				close(started)
			}
		}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no produce acknowledged")
	}
	reassignKadm(t, adm, topic, []int32{1, 2, 3})
	if lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}}); err != nil {
		t.Fatal(err)
	} else if r, ok := lr[topic][0]; ok && (!slices.Equal(r.AddingReplicas, []int32{3}) || !slices.Equal(r.RemovingReplicas, []int32{0})) {
		t.Fatalf("ListPartitionReassignments while moving: %+v", r)
	}
	final := wait("the move completed", func(s controller.PartitionState) bool {
		return !s.Reassigning() && slices.Equal(s.Replicas, []int32{1, 2, 3})
	})
	if final.Leader == 0 || final.Leader == controller.NoLeader || len(final.ISR) != 3 {
		t.Fatalf("after the move: %v", final)
	}
	// Broker 0 deletes its replica once it learns it is no longer assigned.
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Broker(0).Replica(topic, 0); ok {
		t.Errorf("broker 0 still hosts %s-0 after the move", topic)
	}
	// Some more records after the move, then stop.
	acks = append(acks, clustertest.Produce(t, cl, topic, "post", 200)...)
	close(stop)
	wg.Wait()
	acks = append(acks, during...)
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
	if lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}}); err != nil || len(lr[topic]) != 0 {
		t.Fatalf("ListPartitionReassignments after the move: %v %+v", err, lr)
	}
	t.Logf("%d acknowledged records (%d during the move); final %v", len(acks), len(during), final)
}

// TestReassignCancelOverWire: a reassignment whose new replica cannot fetch (its link from
// the leader is down) stays in progress and is listed; kadm cancels it, which restores the
// original replicas; a second cancel gets NO_REASSIGNMENT_IN_PROGRESS; bad targets get
// INVALID_REPLICA_ASSIGNMENT, and a replication-factor change refused by v1's
// allow_replication_factor_change gets INVALID_REPLICATION_FACTOR.
func TestReassignCancelOverWire(t *testing.T) {
	c := clustertest.Start(t, 4, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	const topic = "cancelled"
	wait := placeOn(t, c, adm, topic, []int32{0, 1, 2})
	st := wait("a leader", func(s controller.PartitionState) bool { return s.Leader >= 0 })
	clustertest.Produce(t, clustertest.NewClient(t, c), topic, "pre", 100)
	c.SetLink(st.Leader, 3, netfetch.LinkFault{Down: true})
	defer c.SetLink(st.Leader, 3, netfetch.LinkFault{})
	ctx := clustertest.Context(t)

	reassignKadm(t, adm, topic, []int32{1, 2, 3})
	lr, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := lr[topic][0]
	if !ok || !slices.Equal(r.Replicas, []int32{1, 2, 3, 0}) || !slices.Equal(r.AddingReplicas, []int32{3}) || !slices.Equal(r.RemovingReplicas, []int32{0}) {
		t.Fatalf("ListPartitionReassignments: %+v", lr)
	}
	// Null topics list every reassignment in progress.
	raw, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, clustertest.NewClient(t, c))
	if err != nil || raw.ErrorCode != 0 || len(raw.Topics) != 1 || raw.Topics[0].Topic != topic || len(raw.Topics[0].Partitions) != 1 {
		t.Fatalf("ListPartitionReassignments of every topic: %v %+v", err, raw)
	}

	var cancelReq kadm.AlterPartitionAssignmentsReq
	cancelReq.CancelAssign(topic, 0)
	resp, err := adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil || resp.Error() != nil {
		t.Fatalf("cancel: %v %v", err, resp.Error())
	}
	wait("cancelled", func(s controller.PartitionState) bool {
		return !s.Reassigning() && slices.Equal(s.Replicas, []int32{1, 2, 0})
	})
	resp, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil || !errors.Is(resp.Error(), kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v %v, want NO_REASSIGNMENT_IN_PROGRESS", err, resp.Error())
	}
	for _, bad := range [][]int32{{}, {1, 1, 2}, {1, 2, 9}} {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, bad)
		resp, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil || !errors.Is(resp.Error(), kerr.InvalidReplicaAssignment) {
			t.Errorf("target %v: %v %v, want INVALID_REPLICA_ASSIGNMENT", bad, err, resp.Error())
		}
	}
	var shrink kadm.AlterPartitionAssignmentsReq
	shrink.Assign(topic, 0, []int32{1, 2})
	resp, err = adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), shrink)
	if err != nil || !errors.Is(resp.Error(), kerr.InvalidReplicationFactor) {
		t.Errorf("RF change with allow_replication_factor_change=false: %v %v", err, resp.Error())
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Broker(3).Replica(topic, 0); ok {
		t.Errorf("broker 3 still hosts %s-0 after the cancel", topic)
	}
}

// TestReassignRacesLeaderKill: the leader being moved off is killed while the new replica
// still cannot catch up (its link is down): leadership moves to a target replica, the move
// completes from the new leader once the link heals, nothing acknowledged is lost, and the
// killed broker, restarted, sets its old replica aside instead of hosting it.
func TestReassignRacesLeaderKill(t *testing.T) {
	c := clustertest.Start(t, 4, func(cfg *cluster.Config) { cfg.Broker.ReplicaFetchWaitMaxMs = 50 })
	adm := kadm.NewClient(clustertest.NewClient(t, c))
	const topic = "raced"
	wait := placeOn(t, c, adm, topic, []int32{0, 1, 2})
	if st := wait("led", func(s controller.PartitionState) bool { return s.Leader >= 0 }); st.Leader != 0 {
		if _, err := c.Controller().ElectLeader(topic, 0, false); err != nil {
			t.Fatal(err)
		}
		wait("led by 0", func(s controller.PartitionState) bool { return s.Leader == 0 })
	}
	cl := clustertest.NewClient(t, c, kgo.RecordDeliveryTimeout(25*time.Second))
	acks := clustertest.Produce(t, cl, topic, "pre", 300)
	for _, b := range []int32{0, 1, 2} {
		c.SetLink(b, 3, netfetch.LinkFault{Down: true})
	}
	reassignKadm(t, adm, topic, []int32{1, 2, 3})
	wait("in progress", func(s controller.PartitionState) bool { return s.Reassigning() })
	if err := c.KillBroker(0); err != nil {
		t.Fatal(err)
	}
	st := wait("a new leader in the target", func(s controller.PartitionState) bool { return s.Leader == 1 || s.Leader == 2 })
	if !st.Reassigning() {
		t.Fatalf("the move completed without broker 3: %v", st)
	}
	acks = append(acks, clustertest.Produce(t, cl, topic, "mid", 300)...)
	for _, b := range []int32{0, 1, 2} {
		c.SetLink(b, 3, netfetch.LinkFault{})
	}
	final := wait("the move completed", func(s controller.PartitionState) bool {
		return !s.Reassigning() && slices.Equal(s.Replicas, []int32{1, 2, 3})
	})
	if !slices.Contains(final.ISR, 3) || final.Leader == 0 {
		t.Fatalf("after the move: %v", final)
	}
	acks = append(acks, clustertest.Produce(t, cl, topic, "post", 300)...)
	clustertest.CheckNoLoss(t, acks, clustertest.ConsumeAll(t, c, topic))
	clustertest.CheckReplicasIdentical(t, c, topic, 1)
	if err := c.RestartBroker(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Broker(0).Replica(topic, 0); ok {
		t.Errorf("restarted broker 0 hosts %s-0, which was moved off it", topic)
	}
	strays, _ := filepath.Glob(filepath.Join(c.DataDir(), "broker-0", topic+"-0.*-stray"))
	if len(strays) != 1 {
		t.Errorf("broker 0's old replica directory set aside: %v, want one -stray directory", strays)
	}
}
