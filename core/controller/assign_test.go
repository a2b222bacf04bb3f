package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCreateTopicAssigned: KRaft's checks of a manual assignment, in its order, and the
// partitions it creates (ISR = the alive replicas, led by the first).
func TestCreateTopicAssigned(t *testing.T) {
	c, _ := newTestController(t, 3, Config{})
	ra := func(p int32, rs ...int32) ReplicaAssignment { return ReplicaAssignment{Partition: p, Replicas: rs} }
	for _, tc := range []struct {
		what string
		as   []ReplicaAssignment
		cfg  map[string]string
		want error
	}{
		{"none", nil, nil, kerr.InvalidReplicaAssignment},
		{"a partition twice", []ReplicaAssignment{ra(0, 1), ra(0, 2)}, nil, kerr.InvalidReplicaAssignment},
		{"an empty list", []ReplicaAssignment{ra(0)}, nil, kerr.InvalidReplicaAssignment},
		{"an unregistered broker", []ReplicaAssignment{ra(0, 1, 9)}, nil, kerr.InvalidReplicaAssignment},
		{"a broker twice", []ReplicaAssignment{ra(0, 1, 1)}, nil, kerr.InvalidReplicaAssignment},
		{"lists of different lengths", []ReplicaAssignment{ra(0, 1, 2), ra(1, 3)}, nil, kerr.InvalidReplicaAssignment},
		{"a gap", []ReplicaAssignment{ra(0, 1), ra(2, 2)}, nil, kerr.InvalidReplicaAssignment},
		{"not from 0", []ReplicaAssignment{ra(1, 1)}, nil, kerr.InvalidReplicaAssignment},
		{"min.insync.replicas above the replicas", []ReplicaAssignment{ra(0, 1, 2)}, map[string]string{"min.insync.replicas": "3"}, kerr.InvalidConfig},
	} {
		if _, err := c.CreateTopicAssigned("m", tc.as, tc.cfg, false); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		}
	}
	if _, ok := c.Partitions("m"); ok {
		t.Fatal("a refused assignment created the topic")
	}
	if _, err := c.CreateTopicAssigned("m", []ReplicaAssignment{ra(1, 3, 1), ra(0, 2, 3)}, nil, true); err != nil {
		t.Fatalf("validate only: %v", err)
	}
	if _, ok := c.Partitions("m"); ok {
		t.Fatal("validate only created the topic")
	}
	// Broker 3 fenced: it stays a replica, outside the ISR; partition 1 is led by 1.
	c.BrokerDown(3)
	sts, err := c.CreateTopicAssigned("m", []ReplicaAssignment{ra(1, 3, 1), ra(0, 2, 3)}, map[string]string{"min.insync.replicas": "2"}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionState{
		{Topic: "m", Partition: 0, Leader: 2, Replicas: []int32{2, 3}, ISR: []int32{2}},
		{Topic: "m", Partition: 1, Leader: 1, Replicas: []int32{3, 1}, ISR: []int32{1}},
	}
	for i, st := range sts {
		w := want[i]
		if st.Leader != w.Leader || !slices.Equal(st.Replicas, w.Replicas) || !slices.Equal(st.ISR, w.ISR) {
			t.Errorf("partition %d: %v, want %v", i, st, w)
		}
	}
	if id, ok := c.TopicID("m"); !ok || id == (TopicID{}) {
		t.Errorf("m's topic id %v", id)
	}
	if _, err := c.CreateTopicAssigned("m", []ReplicaAssignment{ra(0, 1)}, nil, false); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if _, err := c.CreateTopicAssigned("n", []ReplicaAssignment{ra(0, 3)}, nil, false); !errors.Is(err, kerr.InvalidReplicaAssignment) {
		t.Errorf("only fenced brokers: %v, want INVALID_REPLICA_ASSIGNMENT", err)
	}
}
