package netfetch

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLoopbackFloor measures the round trips that bound BenchmarkProduceRoundTrip from
// below on this machine, with nothing but Go's net package and goroutines (no Kafka
// protocol, no log, no client library), each hop a goroutine blocked in Read as in the
// wire server:
//
//   - hops=2 (the shape of a produce to a server that does not replicate, kfake): the
//     client writes a 1 KiB request to a server goroutine, which answers 16 bytes;
//   - hops=4 (the shape of acks=all, the least a replicating leader can do): the client
//     writes 1 KiB to the leader, the leader forwards it to a follower, the follower
//     answers the leader 16 bytes (its fetch that reports the new log end), and only then
//     does the leader answer the client;
//   - hops=4/appends=2: the same, and the leader and the follower each append the 1 KiB to a
//     file (one pwrite into the page cache, as a log append without fsync) before they pass
//     it on;
//   - hops=4/appends=3/followers=2 (the shape of acks=all at RF 3): the leader appends, writes
//     the 1 KiB to two followers, each of which appends it and answers, and answers the client
//     once it has both answers. The two followers work at the same time, on the same cores as
//     the client and the leader;
//   - handoff: the leader's goroutine appends and hands the message to one goroutine per
//     follower, which writes it to its follower and reads the answer; the goroutine that reads
//     the last answer answers the client. That is isrbench's shape: the produce wakes the
//     parked fetches of the followers, and the fetch that advances the HW answers the client
//     (isrbench.produce.answer.inline). What it adds to the same shape without the hand-off is
//     the price of waking another goroutine, often on an idle core, on this machine.
//
// hops=4 minus hops=2 is the least time replication adds to one acknowledged record here,
// whatever the server does; appends=2 adds the two log writes that acks=all cannot skip, and
// followers=2 what a second follower adds on this machine's cores. Compare them with kfake's
// p50 in BenchmarkProduceRoundTrip (isrbench-rf2 has one follower, isrbench two).
func BenchmarkLoopbackFloor(b *testing.B) {
	for _, v := range []struct {
		hops, appends, followers int
		handoff                  bool
	}{{2, 0, 0, false}, {4, 0, 1, false}, {4, 2, 1, false}, {4, 3, 2, false}, {4, 2, 1, true}, {4, 3, 2, true}} {
		name := fmt.Sprintf("hops=%d", v.hops)
		if v.appends > 0 {
			name += fmt.Sprintf("/appends=%d", v.appends)
		}
		if v.followers > 1 {
			name += fmt.Sprintf("/followers=%d", v.followers)
		}
		if v.handoff {
			name += "/handoff"
		}
		b.Run(name, func(b *testing.B) {
			client, leader := tcpPair(b)
			var leaderLog *os.File // nil without appends
			if v.appends > 0 {
				leaderLog = floorLog(b, "leader")
			}
			var toFollowers []net.Conn // none with hops=2
			for k := range v.followers {
				var followerLog *os.File
				if v.appends > 0 {
					followerLog = floorLog(b, fmt.Sprintf("follower%d", k))
				}
				tf, follower := tcpPair(b)
				go floorHop(follower, followerLog, nil)
				toFollowers = append(toFollowers, tf)
			}
			if v.handoff {
				go floorHandoff(leader, leaderLog, toFollowers)
			} else {
				go floorHop(leader, leaderLog, toFollowers)
			}
			req := make([]byte, 1024)
			resp := make([]byte, 16)
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				if _, err := client.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, resp); err != nil {
					b.Fatal(err)
				}
				lat[i] = time.Since(t0)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// floorLog is a fresh file for BenchmarkLoopbackFloor's appends, closed when b ends.
func floorLog(b *testing.B, name string) *os.File {
	f, err := os.Create(filepath.Join(b.TempDir(), name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// floorHop serves BenchmarkLoopbackFloor's hops on c until it closes: each 1 KiB message is
// appended to log (if not nil), written to every connection of next and their 16-byte answers
// awaited, then answered on c with 16 bytes.
func floorHop(c net.Conn, log *os.File, next []net.Conn) {
	req := make([]byte, 1024)
	ack := make([]byte, 16)
	var pos int64
	for {
		if !floorReceive(c, req, log, &pos) {
			return
		}
		for _, n := range next {
			if _, err := n.Write(req); err != nil {
				return
			}
		}
		for _, n := range next {
			if _, err := io.ReadFull(n, ack); err != nil {
				return
			}
		}
		if _, err := c.Write(ack); err != nil {
			return
		}
	}
}

// floorHandoff is floorHop for a leader that hands each appended message to one goroutine per
// connection of next, which writes it and reads the 16-byte answer; whichever reads the last
// answer writes the answer on c. The leader's goroutine reads c's next message only after that
// (off the timed path: the client has its answer), so the message buffer is never shared.
func floorHandoff(c net.Conn, log *os.File, next []net.Conn) {
	req := make([]byte, 1024)
	ack := make([]byte, 16)
	var pending atomic.Int32
	answered := make(chan bool, 1) // the answer on c was written (true) or failed (false)
	kicks := make([]chan struct{}, len(next))
	defer func() {
		for _, k := range kicks {
			close(k)
		}
	}()
	for i, n := range next {
		kicks[i] = make(chan struct{}, 1)
		go func(n net.Conn, kick <-chan struct{}) {
			a := make([]byte, 16)
			for range kick {
				_, err := n.Write(req)
				if err == nil {
					_, err = io.ReadFull(n, a)
				}
				if pending.Add(-1) == 0 {
					if err == nil {
						_, err = c.Write(ack)
					}
					answered <- err == nil
				}
			}
		}(n, kicks[i])
	}
	var pos int64
	for {
		if !floorReceive(c, req, log, &pos) {
			return
		}
		pending.Store(int32(len(next)))
		for _, k := range kicks {
			k <- struct{}{}
		}
		if !<-answered {
			return
		}
	}
}

// floorReceive reads the next message from c into req and appends it to log at *pos (if log is
// not nil); false when either fails.
func floorReceive(c net.Conn, req []byte, log *os.File, pos *int64) bool {
	if _, err := io.ReadFull(c, req); err != nil {
		return false
	}
	if log != nil {
		if _, err := log.WriteAt(req, *pos); err != nil {
			return false
		}
		*pos += int64(len(req))
	}
	return true
}
