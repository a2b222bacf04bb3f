package netfetch

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cost counts the socket system calls, the bytes and the requests of the wire servers and
// replica fetchers that count in one Counters (ServerConfig.Counters, Transport.SetCounters:
// an embedded cluster's), for the harness's cost accounting per record (take two snapshots and
// subtract; Counters.Cost). Connections of clients (franz-go) are not counted: they are not
// this package's. A snapshot value.
type Cost struct {
	// System calls on sockets, counted where this package issues them: Read is every read(2),
	// also one that found nothing yet (EAGAIN) before the poller waited; Write counts write(2)
	// calls of responses, request frames and zero-copy headers (a write the kernel takes
	// partially, rare on loopback, counts once); Sendfile counts sendfile(2) calls, Sendmsg the
	// sendmsg(2) calls with MSG_MORE that send a zero-copy response's headers ahead of its file
	// bytes.
	Read, Write, Sendfile, Sendmsg int64
	// UringEnter counts the replica fetchers' io_uring_enter calls (isrbench.replica.fetch.uring):
	// each sends a fetch and receives its response, where Write and Read would count one each.
	UringEnter int64
	// Bytes: ReadBytes and WriteBytes were copied between user space and the socket;
	// SendfileBytes went from the page cache to the socket without a copy through user space.
	ReadBytes, WriteBytes, SendfileBytes int64
	// TLSCopyBytes are the Fetch responses' record bytes written through TLS: copied (pread,
	// then encrypted) where a plaintext listener would send them with sendfile.
	TLSCopyBytes int64

	// Leader side (the wire server): requests received, and Fetch responses written.
	ProduceRequests        int64
	FetchRequests          int64 // consumer and replica Fetches
	ReplicaFetchRequests   int64 // of which from followers (replica_id >= 0)
	FetchResponses         int64
	FollowerFetchRequests  int64 // follower side: replica Fetches the fetchers sent
	FollowerFetchResponses int64 // follower side: replica Fetch responses they decoded

	// Request time on the leaders by kind, Kafka's request metrics summed (RequestMetrics
	// LocalTimeMs, RemoteTimeMs, ResponseSendTimeMs): see ReqTime.
	Produce, ReplicaFetch, ConsumerFetch, Other ReqTime
}

// ReqTime is where the requests of one kind spent their time on the leader, summed over the
// requests, from a request read off the socket to its response written:
//   - Local: the handler working: decoding, appending or reading the log, encoding (Kafka's
//     LocalTimeMs). It leaves out what the handler waited for, so it is the part of a request
//     that grows with the CPU a build spends on it and not with the load or the followers.
//   - Remote: waiting, not working: a Produce's acks=all wait for the HW (and a
//     ProduceDelay), a Fetch's long poll parked until data or max.wait.ms, a JoinGroup's or
//     SyncGroup's whole call to the coordinator (the rebalance wait) (RemoteTimeMs).
//   - Send: writing the response to the socket, sendfile(2) included (ResponseSendTimeMs); it
//     grows when a client reads slowly.
type ReqTime struct {
	Requests            int64
	Local, Remote, Send time.Duration
}

// Sub returns t - o.
func (t ReqTime) Sub(o ReqTime) ReqTime {
	return ReqTime{Requests: t.Requests - o.Requests, Local: t.Local - o.Local, Remote: t.Remote - o.Remote, Send: t.Send - o.Send}
}

// Request kinds of the request-time counters (Cost.Produce ... Cost.Other).
type reqKind int8

const (
	kindOther reqKind = iota
	kindProduce
	kindReplicaFetch
	kindConsumerFetch
	numReqKinds
)

// costCounters are the counters behind Cost, a part of a Counters: one atomic add per event
// (and one for its bytes), no lock, no allocation.
type costCounters struct {
	read, write, sendfile, sendmsg        atomic.Int64
	uringEnter                            atomic.Int64
	readBytes, writeBytes, sendfileBytes  atomic.Int64
	tlsCopyBytes                          atomic.Int64
	produce, fetch, replicaFetch, fetched atomic.Int64
	followerFetch, followerFetched        atomic.Int64
	// reqTimes are the request-time counters, one set per kind (nanoseconds).
	reqTimes [numReqKinds]struct {
		requests, local, remote, send atomic.Int64
	}
}

// countReqTime adds one request of kind that took total, of which remote waiting and send
// writing the response.
func (c *costCounters) countReqTime(k reqKind, total, remote, send time.Duration) {
	t := &c.reqTimes[k]
	t.requests.Add(1)
	local := total - remote - send
	if local < 0 {
		local = 0 // a clock step
	}
	t.local.Add(int64(local))
	t.remote.Add(int64(remote))
	t.send.Add(int64(send))
}

func (c *costCounters) readReqTime(k reqKind) ReqTime {
	t := &c.reqTimes[k]
	return ReqTime{Requests: t.requests.Load(), Local: time.Duration(t.local.Load()), Remote: time.Duration(t.remote.Load()), Send: time.Duration(t.send.Load())}
}

// Sub returns c - o, field by field.
func (c Cost) Sub(o Cost) Cost {
	return Cost{
		Read: c.Read - o.Read, Write: c.Write - o.Write, Sendfile: c.Sendfile - o.Sendfile, Sendmsg: c.Sendmsg - o.Sendmsg,
		UringEnter: c.UringEnter - o.UringEnter,
		ReadBytes:  c.ReadBytes - o.ReadBytes, WriteBytes: c.WriteBytes - o.WriteBytes, SendfileBytes: c.SendfileBytes - o.SendfileBytes,
		TLSCopyBytes:    c.TLSCopyBytes - o.TLSCopyBytes,
		ProduceRequests: c.ProduceRequests - o.ProduceRequests, FetchRequests: c.FetchRequests - o.FetchRequests,
		ReplicaFetchRequests: c.ReplicaFetchRequests - o.ReplicaFetchRequests, FetchResponses: c.FetchResponses - o.FetchResponses,
		FollowerFetchRequests:  c.FollowerFetchRequests - o.FollowerFetchRequests,
		FollowerFetchResponses: c.FollowerFetchResponses - o.FollowerFetchResponses,
		Produce:                c.Produce.Sub(o.Produce), ReplicaFetch: c.ReplicaFetch.Sub(o.ReplicaFetch),
		ConsumerFetch: c.ConsumerFetch.Sub(o.ConsumerFetch), Other: c.Other.Sub(o.Other),
	}
}

// Cost returns the cost counters of the servers and fetchers counting in c so far. Safe for
// concurrent use.
func (c *Counters) Cost() Cost { return c.c.cost.snapshot() }

func (costs *costCounters) snapshot() Cost {
	return Cost{
		Read: costs.read.Load(), Write: costs.write.Load(), Sendfile: costs.sendfile.Load(), Sendmsg: costs.sendmsg.Load(),
		UringEnter: costs.uringEnter.Load(),
		ReadBytes:  costs.readBytes.Load(), WriteBytes: costs.writeBytes.Load(), SendfileBytes: costs.sendfileBytes.Load(),
		TLSCopyBytes:    costs.tlsCopyBytes.Load(),
		ProduceRequests: costs.produce.Load(), FetchRequests: costs.fetch.Load(), ReplicaFetchRequests: costs.replicaFetch.Load(),
		FetchResponses: costs.fetched.Load(), FollowerFetchRequests: costs.followerFetch.Load(),
		FollowerFetchResponses: costs.followerFetched.Load(),
		Produce:                costs.readReqTime(kindProduce), ReplicaFetch: costs.readReqTime(kindReplicaFetch),
		ConsumerFetch: costs.readReqTime(kindConsumerFetch), Other: costs.readReqTime(kindOther),
	}
}

// countSocketWrite counts one write(2) of n bytes to a socket.
func (costs *costCounters) countSocketWrite(n int) {
	costs.write.Add(1)
	costs.writeBytes.Add(int64(n))
}

// countFetch counts a Fetch request received by a leader (replica: from a follower).
func (costs *costCounters) countFetch(replica bool) {
	costs.fetch.Add(1)
	if replica {
		costs.replicaFetch.Add(1)
	}
}

// countFetchResponse counts a Fetch response written when err is nil, and returns err.
func (costs *costCounters) countFetchResponse(err error) error {
	if err == nil {
		costs.fetched.Add(1)
	}
	return err
}

// sockReader reads a TCP connection with read(2) inside RawConn.Read, so that every read system
// call is counted (in costs), including one that finds nothing yet (EAGAIN) before the runtime poller waits
// for readability. Deadlines and Close apply as to the connection's Read. Owned by the goroutine
// reading the connection.
type sockReader struct {
	raw   syscall.RawConn
	costs *costCounters
	fn    func(fd uintptr) bool // read, bound once: no closure per call
	p     []byte
	n     int
	err   error
	// inRaw: Read is called inside a RawConn.Read callback on fd, and reads with readNow
	// (readready.go); drained: the last read there emptied the socket.
	inRaw   bool
	fd      int
	drained bool
}

// newSockReader returns a reader of nc counted in costs: a sockReader for a TCP connection,
// else (a fault-injecting wrapper) a reader that counts each Read as one call.
func newSockReader(nc net.Conn, costs *costCounters) io.Reader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return countedReader{nc, costs}
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return countedReader{nc, costs}
	}
	r := &sockReader{raw: raw, costs: costs}
	r.fn = r.read
	return r
}

func (r *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.inRaw {
		return r.readNow(p)
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.raw.Read(r.fn)
	r.p = nil
	switch {
	case err != nil:
		return 0, err // closed, deadline exceeded (a *net.OpError)
	case r.err != nil:
		return 0, r.err
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

func (r *sockReader) read(fd uintptr) bool {
	for {
		n, err := unix.Read(int(fd), r.p)
		r.costs.read.Add(1)
		switch err {
		case nil:
			r.n = n
			r.costs.readBytes.Add(int64(n))
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait for readability, then call again
		}
		r.err = os.NewSyscallError("read", err)
		return true
	}
}

// countedReader counts each Read of a connection that is not a bare TCP connection in costs.
type countedReader struct {
	r     io.Reader
	costs *costCounters
}

func (c countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.costs.read.Add(1)
	c.costs.readBytes.Add(int64(n))
	return n, err
}
