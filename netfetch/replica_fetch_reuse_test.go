package netfetch

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/broker"
)

// scriptedLeader reads replica Fetch requests from c and answers each with an empty
// response of session 42, handing the decoded request to got.
func scriptedLeader(t *testing.T, c net.Conn, got chan<- *kmsg.FetchRequest) {
	br := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			close(got)
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			close(got)
			return
		}
		r := kbin.Reader{Src: frame}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString() // client id
		kmsg.SkipTags(&r)
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		if err := r.Complete(); key != 1 || err != nil {
			t.Errorf("request key %d, header: %v", key, err)
		} else if err := req.ReadFrom(r.Src); err != nil {
			t.Errorf("decoding the fetch request: %v", err)
		}
		got <- req
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(version)
		resp.SessionID = 42
		out := kbin.AppendInt32(nil, 0)
		out = kbin.AppendInt32(out, corr)
		out = append(out, 0) // response header v1: no tags
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// named lists a fetch request's partitions as "p@offset" and its forgotten ones as "-p".
func named(req *kmsg.FetchRequest) string {
	var out []string
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%d@%d", p.Partition, p.FetchOffset))
		}
	}
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("-%d", p))
		}
	}
	return fmt.Sprint(out)
}

// TestReplicaFetchReusedPlanNamesOnlyMoved: over a real socket, a fetcher's reused plan
// (FetchRequest.Reused) makes the session's incremental request name only the Moved entries
// whose position changed, and forget nothing; a plan that is not reused is compared entry by
// entry (a partition left out is forgotten); a full request names every partition.
func TestReplicaFetchReusedPlanNamesOnlyMoved(t *testing.T) {
	a, b := tcpPair(t)
	got := make(chan *kmsg.FetchRequest, 1)
	go scriptedLeader(t, b, got)
	fc := &fetchConn{self: 1, source: 2, clientID: "t", nc: a, br: bufio.NewReader(a), costs: new(costCounters), sess: sessionClient{enabled: true}}
	defer fc.Close()
	parts := make([]broker.FetchPartition, 4)
	for i := range parts {
		parts[i] = broker.FetchPartition{Topic: "t", Partition: int32(i), FetchOffset: 10, MaxBytes: 1 << 20}
	}
	rf := &broker.FetchRequest{ReplicaID: 1, MaxWait: time.Millisecond, MinBytes: 1, MaxBytes: 1 << 20, Partitions: parts}
	for i, step := range []struct {
		reused bool
		moved  []int
		change func()
		want   string // the partitions the request names and forgets
		epoch  int32
	}{
		{want: "[0@10 1@10 2@10 3@10]", epoch: 0},
		{reused: true, want: "[]", epoch: 1},
		// Entries 1 and 3 moved, entry 2 is listed but did not change.
		{reused: true, moved: []int{1, 2, 3}, change: func() { parts[1].FetchOffset, parts[3].FetchOffset = 12, 11 }, want: "[1@12 3@11]", epoch: 2},
		{reused: true, want: "[]", epoch: 3},
		// Not reused: every entry compared; partition 0 leaves the fetcher.
		{change: func() { rf.Partitions = parts[1:]; parts[2].FetchOffset = 15 }, want: "[2@15 -0]", epoch: 4},
		{reused: true, moved: []int{0}, change: func() { parts[1].FetchOffset = 13 }, want: "[1@13]", epoch: 5},
	} {
		if step.change != nil {
			step.change()
		}
		rf.Reused, rf.Moved = step.reused, step.moved
		if _, err := fc.Fetch(context.Background(), rf); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		req := <-got
		if s := named(req); s != step.want || req.SessionEpoch != step.epoch {
			t.Fatalf("step %d: epoch %d naming %s, want epoch %d naming %s", i, req.SessionEpoch, s, step.epoch, step.want)
		}
	}
	// A reused plan the session does not hold (a new connection's session) is sent in full.
	fc.sess.reset()
	rf.Reused, rf.Moved = true, nil
	if _, err := fc.Fetch(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	if req := <-got; req.SessionEpoch != 0 || named(req) != "[1@13 2@15 3@11]" {
		t.Fatalf("after a session reset: epoch %d naming %s, want a full request", req.SessionEpoch, named(req))
	}
}
