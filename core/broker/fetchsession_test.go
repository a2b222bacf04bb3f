package broker

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// sessionParts is the partitions a session fetch answered, with what the client must see.
func sessionParts(req *FetchRequest) string {
	out := ""
	for _, p := range req.Partitions {
		if out != "" {
			out += " "
		}
		switch {
		case p.Err != nil:
			out += fmt.Sprintf("%d:err", p.Partition)
		default:
			out += fmt.Sprintf("%d:hw=%d,ls=%d,bytes=%v", p.Partition, p.HighWatermark, p.LogStartOffsetOut, p.Records.Size > 0)
		}
	}
	return "[" + out + "]"
}

// TestFetchSessionAnswersEveryChange: an incremental fetch on a session visits only what
// changed, and its response carries every partition whose records, HW, log start or error
// changed, even one the request did not name, and no other; a parked session fetch is woken
// by the partition that got data.
func TestFetchSessionAnswersEveryChange(t *testing.T) {
	c := newTestCluster(t, 1, testConfig())
	c.createTopic("s", 4, 1, nil)
	l := c.leader("s", 3)
	ctx := context.Background()
	produce := func(p int32) {
		t.Helper()
		pp := []ProducePartition{{Topic: "s", Partition: p, Records: batch("r", 1)}}
		l.Produce(ctx, 1, time.Second, pp)
		if pp[0].Err != nil {
			t.Fatal(pp[0].Err)
		}
	}
	for p := int32(0); p < 4; p++ {
		produce(p)
	}
	s := l.NewFetchSession(false)
	defer s.Close()
	set := func(p int32, offset int64) {
		s.Set(&FetchPartition{Topic: "s", Partition: p, FetchOffset: offset, CurrentLeaderEpoch: -1, LogStartOffset: -1, MaxBytes: 1 << 20}, false)
	}
	req := &FetchRequest{ReplicaID: -1, MaxBytes: 1 << 20}
	fetch := func(want string) {
		t.Helper()
		l.SessionFetch(ctx, s, req)
		got := sessionParts(req)
		for i := range req.Partitions {
			req.Partitions[i].Records.Release()
		}
		if got != want {
			t.Fatalf("session fetch answered %s, want %s", got, want)
		}
	}
	for p := int32(0); p < 4; p++ {
		set(p, 0)
	}
	fetch("[0:hw=1,ls=0,bytes=true 1:hw=1,ls=0,bytes=true 2:hw=1,ls=0,bytes=true 3:hw=1,ls=0,bytes=true]")
	for p := int32(0); p < 4; p++ {
		set(p, 1) // the client moved on
	}
	fetch("[]")
	fetch("[]")

	// New records on 2, which the request does not name: answered, and again until the client
	// moves on.
	produce(2)
	fetch("[2:hw=2,ls=0,bytes=true]")
	fetch("[2:hw=2,ls=0,bytes=true]")
	set(2, 2)
	fetch("[]")

	// The log start of 3 moves (DeleteRecords): answered once.
	if _, err := l.DeleteRecordsOnLeader("s", 3, 1); err != nil {
		t.Fatal(err)
	}
	fetch("[3:hw=1,ls=1,bytes=false]")
	fetch("[]")

	// A partition that is not hosted: its error is answered on every fetch.
	set(9, 0)
	fetch("[9:err]")
	fetch("[9:err]")
	s.Forget("s", 9)
	fetch("[]")

	// Parked (min bytes 1, long wait): woken by a record on 1.
	req.MinBytes, req.MaxWait = 1, time.Minute
	done := make(chan string, 1)
	parked := make(chan struct{}, 1)
	l.parkedHook = func() {
		select {
		case parked <- struct{}{}:
		default:
		}
	}
	go func() {
		l.SessionFetch(ctx, s, req)
		got := sessionParts(req)
		for i := range req.Partitions {
			req.Partitions[i].Records.Release()
		}
		done <- got
	}()
	select {
	case <-parked:
	case <-time.After(time.Minute):
		t.Fatal("the session fetch did not park")
	}
	produce(1)
	select {
	case got := <-done:
		if want := "[1:hw=2,ls=0,bytes=true]"; got != want {
			t.Fatalf("woken session fetch answered %s, want %s", got, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("a record on 1 did not wake the parked session fetch")
	}
}
