package controller

import (
	"testing"
)

func benchController(b *testing.B, parts int32) *Controller {
	c := New(Config{})
	b.Cleanup(c.Close)
	for id := int32(1); id <= 3; id++ {
		c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
	}
	if _, err := c.CreateTopic("bench", parts, 3, nil); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkAlterPartition: an ISR shrink/expand cycle on a 1000-partition
// topic with a subscriber per broker (notification enqueue included).
func BenchmarkAlterPartition(b *testing.B) {
	c := benchController(b, 1000)
	for id := int32(1); id <= 3; id++ {
		b.Cleanup(c.Subscribe(id, onPartition(func(PartitionState) {})))
	}
	st, _ := c.Partition("bench", 0)
	isrs := [][]int32{{1, 2}, {1, 2, 3}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, err := alterISR(c, "bench", 0, st.Leader, st.LeaderEpoch, st.PartitionEpoch, isrs[i%2])
		if err != nil {
			b.Fatal(err)
		}
		st = next
	}
}

// BenchmarkPartition: one metadata read (a copied state).
func BenchmarkPartition(b *testing.B) {
	c := benchController(b, 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := c.Partition("bench", int32(i%1000)); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkHeartbeat: the periodic liveness call of every broker.
func BenchmarkHeartbeat(b *testing.B) {
	c := benchController(b, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Heartbeat(int32(i%3)+1, -1)
	}
}

// BenchmarkCreateTopic10000: creating a 10,000-partition RF 3 topic on a controller with a
// durable metadata log (the time its lock is held, which heartbeats wait for).
func BenchmarkCreateTopic10000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c, _, err := Open(Config{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		for id := int32(1); id <= 3; id++ {
			c.RegisterBroker(Registration{ID: id, Host: "127.0.0.1", Port: 9090 + id})
		}
		for id := int32(1); id <= 3; id++ {
			defer c.SubscribeBatch(id, func([]Update) {})()
		}
		b.StartTimer()
		if _, err := c.CreateTopic("bench", 10000, 3, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Close()
	}
}
