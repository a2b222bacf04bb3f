package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestReplicaCapacity: with ReplicaCapacity set, creates that would host more partition
// replicas than it allows are refused with POLICY_VIOLATION and a message naming the limit,
// the replicas hosted and the replicas asked for; nothing is created; creates within it,
// and creates after a deletion freed replicas, are accepted.
func TestReplicaCapacity(t *testing.T) {
	limit := int64(30)
	c, _ := newTestController(t, 3, Config{ReplicaCapacity: func() (int64, string) { return limit, "the test's file limit" }})
	mustCreate(t, c, "a", 6, 3, nil) // 18 hosted
	refused := func(what string, err error, asked, hosted int64) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("%s beyond the capacity: %v, want POLICY_VIOLATION", what, err)
		}
		for _, want := range []string{
			"the test's file limit", "at most 30", "ulimit -n",
			fmt.Sprintf("host %d already", hosted), fmt.Sprintf("%d more partition replicas", asked),
		} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %q does not say %q", what, err, want)
			}
		}
	}
	_, err := c.CreateTopic("b", 5, 3, nil) // 15 more: 33 > 30
	refused("CreateTopic", err, 15, 18)
	if _, ok := c.Partitions("b"); ok {
		t.Fatal("the refused topic exists")
	}
	refused("ValidateCreateTopic", c.ValidateCreateTopic("b", 5, 3, nil), 15, 18)
	_, err = c.CreatePartitions("a", 11, nil, false) // 5 more partitions x RF 3
	refused("CreatePartitions", err, 15, 18)
	_, err = c.CreatePartitions("a", 11, nil, true)
	refused("CreatePartitions (validate only)", err, 15, 18)
	if sts, _ := c.Partitions("a"); len(sts) != 6 {
		t.Fatalf("topic a has %d partitions after a refused CreatePartitions", len(sts))
	}
	mustCreate(t, c, "b", 4, 3, nil) // 30: exactly the capacity
	if _, err := c.CreateTopic("c", 1, 1, nil); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("one replica past the capacity: %v", err)
	}
	if err := c.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, "c", 6, 3, nil)
	if _, err := c.CreatePartitions("c", 7, nil, false); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("CreatePartitions past the capacity: %v", err)
	}
	limit = 1 << 20 // the file limit was raised
	if _, err := c.CreatePartitions("c", 7, nil, false); err != nil {
		t.Fatalf("CreatePartitions after the limit was raised: %v", err)
	}
}
