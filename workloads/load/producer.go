package load

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/spec"
)

// Window is the measurement window [start, end) in unix ns: samples whose intended send time
// falls outside it (warm-up, drain) are not recorded. Set once before the load starts.
type Window struct {
	Start, End int64
}

func (w Window) In(ns int64) bool { return ns >= w.Start && ns < w.End }

// Producer is one kgo client driven by one goroutine. Its promise callbacks run on kgo's
// goroutines, so everything they touch is behind mu or atomic.
type Producer struct {
	ID     uint32
	spec   spec.ProducerSpec
	topic  string
	cl     *kgo.Client
	rate   float64 // this producer's records/s (0 = closed loop)
	Win    Window
	mode   WaitMode
	keyRng *rand.Rand // producer goroutine only
	Group  int        // index in Spec.ProducerGroups
	// obs, when set, gets every acknowledged record's offset (client-observed HW lag).
	Obs *HWObserver

	SendDelay *results.Histogram // producer goroutine only
	Ack       *results.Recorder  // promise goroutines; the timeline takes intervals
	// txn is the transaction state of a transactional producer (producer_txn.go), nil
	// otherwise; Commit its commit latency (first intended send -> EndTxn answered).
	txn    *txnProducer
	Commit *results.Recorder

	opts      []kgo.Opt       // the client's options (a restarted producer's new client takes them)
	restart   chan restartReq // restart-producer requests (producer_restart.go)
	mu        sync.Mutex      // guards cl's replacement, acked, ackPart, ackTop, errs, partErrs, failTimes, txns, txnErrs
	acked     bitset          // seq -> acknowledged (whole run, for the durability check)
	ackPart   partLog         // seq -> partition of the acknowledged record (to tell expired from lost)
	ackTop    []int64         // partition -> highest acknowledged offset + 1, 0 for none (see noteTop)
	errs      map[string]int64
	partErrs  map[int32]map[string]int64 // partition -> error name -> failed records (whole run)
	failTimes []int64                    // intended send times (unix ns) of failed records
	txns      []txnRange                 // a transactional producer's ended transactions
	txnErrs   map[string]int64           // its transaction calls' errors ("END_TXN:<name>")
	NAcked    atomic.Int64               // acknowledged in the window
	NBytes    atomic.Int64               // acknowledged bytes in the window
	NErrs     atomic.Int64               // failed records (whole run)
	inFl      sync.WaitGroup

	pool      sync.Pool                      // *kgo.Record with a message.size value
	promiseFn func(r *kgo.Record, err error) // p.promise, made once (a method value per Produce allocates)
}

// producerOpts are the kgo options the spec asks for.
func producerOpts(p spec.ProducerSpec, topic string) []kgo.Opt {
	opts := []kgo.Opt{
		// Refresh metadata soon after NOT_LEADER_OR_FOLLOWER (kgo's default min age is 5 s;
		// the Java client refreshes after retry.backoff.ms=100): failover latency is the core's.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Duration(p.LingerMs) * time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(p.BatchSize)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(p.MaxBufferedRecords),
	}
	if p.RequestTimeoutMs > 0 {
		opts = append(opts, kgo.ProduceRequestTimeout(time.Duration(p.RequestTimeoutMs)*time.Millisecond))
	}
	if p.DeliveryTimeoutMs > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(time.Duration(p.DeliveryTimeoutMs)*time.Millisecond))
	}
	if p.Retries < math.MaxInt32 {
		opts = append(opts, kgo.RecordRetries(p.Retries))
	}
	switch p.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if !p.EnableIdempotence {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	switch p.Keys {
	case "none":
		if p.Rate > 0 {
			opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		} else {
			// Closed loop: fill batches (sticky to a partition until the batch is sent).
			opts = append(opts, kgo.RecordPartitioner(kgo.StickyPartitioner()))
		}
	default:
		// Kafka's murmur2 over the key, like the Java client's default partitioner.
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	}
	return opts
}

// NewProducer creates producer id of group spec; txnID is its transactional.id ("" for a
// producer that is not transactional, see spec.TransactionalID).
func NewProducer(id uint32, conn []kgo.Opt, spec spec.ProducerSpec, topic string, rate float64, win Window, mode WaitMode, txnID string) (*Producer, error) {
	opts := append(conn[:len(conn):len(conn)], producerOpts(spec, topic)...)
	if txnID != "" {
		opts = append(opts, txnOpts(spec, txnID)...)
	}
	if l := clientLogger(); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	cl, err := newClient(roleProducer, opts...)
	if err != nil {
		return nil, err
	}
	p := &Producer{ID: id, spec: spec, topic: topic, cl: cl, opts: opts, restart: make(chan restartReq, 1), rate: rate, Win: win, mode: mode,
		keyRng:    rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano()))),
		SendDelay: results.NewHistogram(), Ack: results.NewRecorder(), errs: map[string]int64{}}
	if txnID != "" {
		p.txn, p.Commit = newTxnProducer(txnID, spec.Txn), results.NewRecorder()
	}
	size := spec.MessageSize
	p.pool.New = func() any { return &kgo.Record{Value: make([]byte, size)} }
	p.promiseFn = p.promise
	return p, nil
}

// run produces on the pacer's schedule from start until end (exclusive), then returns; the
// records still in flight finish later (wait with drain). pprof label role=producer-client.
func (p *Producer) Run(ctx context.Context, start, end time.Time) error {
	var err error
	pprof.Do(ctx, pprof.Labels("role", roleProducer), func(ctx context.Context) {
		err = p.loop(ctx, start, end)
	})
	return err
}

// pacer is the producer's schedule from start to end: its wait mode (spin when a timerfd
// cannot be made), dithered with producers.pacer.dither.
func (p *Producer) pacer(start, end time.Time) (*Pacer, error) {
	pc, err := NewPacer(p.rate, start, end, p.mode)
	if err != nil && (p.mode == WaitTimerfd || p.mode == WaitTimerfdOneShot) {
		pc, err = NewPacer(p.rate, start, end, WaitSpin)
	}
	if err != nil {
		return nil, err
	}
	if p.spec.PacerDither {
		// The same phases for every producer (of every worker process): the producers of a
		// group keep the stagger the runner starts them with, 1/rate of the group apart, and
		// do not send at the same moment more often than without the dither.
		pc.Dither(ditherSeed)
	}
	return pc, nil
}

// ditherSeed picks the phases of every dithered producer's schedule.
const ditherSeed = 0x69737262656e6368

func (p *Producer) loop(ctx context.Context, start, end time.Time) error {
	pc, err := p.pacer(start, end)
	if err != nil {
		return err
	}
	defer pc.Close()
	var seq uint64
	var fixedKey = []byte("isrbench")
	for {
		intended, actual, ok := pc.Next(ctx)
		if !ok {
			if p.txn != nil && p.txn.open && seq > p.txn.first {
				select {
				case req := <-p.restart: // the load ended before half a transaction (a slow machine): kill it in this one
					req.done <- p.restartTxn(ctx, seq)
					return nil
				default:
				}
			}
			return p.endTxn(ctx, seq) // a transactional producer's last transaction
		}
		in := intended.UnixNano()
		if err := p.beginTxn(seq, in); err != nil {
			return err
		}
		if p.Win.In(in) {
			if p.rate > 0 {
				p.SendDelay.RecordNs(actual.Sub(intended).Nanoseconds())
			} else {
				p.SendDelay.Record(0) // closed loop: every slot is "now"
			}
		}
		r := p.pool.Get().(*kgo.Record)
		PutHeader(r.Value, Header{ProducerID: p.ID, Seq: seq, Intended: in})
		switch p.spec.Keys {
		case "uniform":
			if r.Key == nil {
				r.Key = make([]byte, 8)
			}
			binary.LittleEndian.PutUint64(r.Key, p.keyRng.Uint64())
		case "fixed":
			r.Key = fixedKey
		}
		seq++
		p.inFl.Add(1)
		p.cl.Produce(ctx, r, p.promiseFn)
		if p.txn != nil && p.txn.open && seq-p.txn.first >= max(1, uint64(p.txn.records)/2) {
			select {
			case req := <-p.restart: // half-way through a transaction: kill the producer in it
				req.done <- p.restartTxn(ctx, seq)
			default:
			}
		}
		if p.txnFull(seq) {
			if err := p.endTxn(ctx, seq); err != nil {
				return err
			}
		}
	}
}

func (p *Producer) promise(r *kgo.Record, err error) {
	defer p.inFl.Done()
	h, herr := ParseHeader(r.Value)
	if herr != nil {
		panic("BUG: producer record without its header")
	}
	if err != nil {
		if p.txn != nil {
			p.txn.sendFailed.Store(true)
		}
		p.NErrs.Add(1)
		name := errorName(err)
		p.mu.Lock()
		p.errs[name]++
		if p.partErrs == nil {
			p.partErrs = map[int32]map[string]int64{}
		}
		pe := p.partErrs[r.Partition]
		if pe == nil {
			pe = map[string]int64{}
			p.partErrs[r.Partition] = pe
		}
		pe[name]++
		p.failTimes = append(p.failTimes, h.Intended)
		p.mu.Unlock()
	} else {
		now := time.Now().UnixNano()
		if p.Win.In(h.Intended) {
			p.Ack.RecordNs(now - h.Intended)
			p.NAcked.Add(1)
			p.NBytes.Add(int64(len(r.Value) + len(r.Key)))
		}
		if p.Obs != nil && p.spec.Acks != "0" {
			p.Obs.Acked(r.Partition, r.Offset, now, h.Intended)
		}
		if p.spec.Acks != "0" {
			p.mu.Lock()
			p.acked.set(h.Seq)
			p.ackPart.set(h.Seq, r.Partition)
			p.noteTop(r.Partition, r.Offset)
			p.mu.Unlock()
		}
	}
	key := r.Key
	if p.spec.Keys != "uniform" {
		key = nil // fixed: the shared key slice is set again on reuse
	}
	*r = kgo.Record{Key: key, Value: r.Value} // kgo filled Topic, Partition, Offset, Timestamp, ...
	p.pool.Put(r)
}

// noteTop records an acknowledged offset of partition part (p.mu held). The durability check
// reads it for a producer of which retention left nothing in a partition.
func (p *Producer) noteTop(part int32, off int64) {
	if part < 0 {
		return
	}
	for int(part) >= len(p.ackTop) {
		p.ackTop = append(p.ackTop, 0)
	}
	p.ackTop[part] = max(p.ackTop[part], off+1)
}

// drain waits until every produced record's promise ran, or ctx ends (records still
// buffered then are aborted by Close and counted as errors).
func (p *Producer) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		_ = p.client().Flush(ctx)
		p.inFl.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.client().Close() // aborts buffered records: their promises run with an error
		<-done
		return ctx.Err()
	}
}

func (p *Producer) ErrCounts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.errs))
	for k, v := range p.errs {
		out[k] = v
	}
	return out
}

// errorName maps a produce error to a Kafka error name (kerr) or a client-side name.
func errorName(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "RECORD_TIMEOUT" // client-side delivery.timeout.ms
	case errors.Is(err, kgo.ErrRecordRetries):
		return "RECORD_RETRIES"
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "ABORTED" // still buffered when the run stopped
	case errors.Is(err, kgo.ErrMaxBuffered):
		return "MAX_BUFFERED"
	case errors.Is(err, errSendFailed):
		return "SEND_FAILED"
	}
	return kerr.UnknownServerError.Message
}

// bitset is a growable set of uint64 (producer sequence numbers). Not safe for concurrent use.
type bitset struct{ w []uint64 }

func (b *bitset) set(i uint64) bool {
	wi := int(i >> 6)
	for wi >= len(b.w) {
		b.w = append(b.w, make([]uint64, len(b.w)+64)...)
	}
	m := uint64(1) << (i & 63)
	was := b.w[wi]&m != 0
	b.w[wi] |= m
	return was
}

func (b *bitset) has(i uint64) bool {
	wi := int(i >> 6)
	return wi < len(b.w) && b.w[wi]&(uint64(1)<<(i&63)) != 0
}

func (b *bitset) count() int64 {
	var n int64
	for _, w := range b.w {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// partLog maps a producer sequence number to the partition its record was acknowledged in:
// one byte per sequence while every partition is below 255, two bytes once one is not (the
// durability check needs it to tell records deleted by retention from lost ones). Not safe
// for concurrent use.
type partLog struct {
	b8  []uint8
	b16 []uint16 // used instead of b8 once a partition >= 255 was set
}

// set records partition p for seq (p >= 0).
func (l *partLog) set(seq uint64, p int32) {
	if l.b16 == nil && p >= math.MaxUint8 {
		l.b16 = make([]uint16, len(l.b8), max(cap(l.b8), 64))
		for i, v := range l.b8 {
			l.b16[i] = uint16(v)
		}
		l.b8 = nil
	}
	i := int(seq)
	if l.b16 != nil {
		for i >= len(l.b16) {
			l.b16 = append(l.b16, make([]uint16, len(l.b16)+64)...)
		}
		l.b16[i] = uint16(p)
		return
	}
	for i >= len(l.b8) {
		l.b8 = append(l.b8, make([]uint8, len(l.b8)+64)...)
	}
	l.b8[i] = uint8(p)
}

// get returns the partition recorded for seq (0 if none was).
func (l *partLog) get(seq uint64) int32 {
	i := int(seq)
	if l.b16 != nil {
		if i < len(l.b16) {
			return int32(l.b16[i])
		}
		return 0
	}
	if i < len(l.b8) {
		return int32(l.b8[i])
	}
	return 0
}

// ClientLogEnv names the environment variable that turns on the producers' kgo client log on
// stderr: error, warn, info or debug (unset or anything else: off). Each line starts with the
// wall-clock time in microseconds, to line up with timeline.csv and partitions.csv.
const ClientLogEnv = "ISRBENCH_KGO_LOG"

func clientLogger() kgo.Logger {
	var level kgo.LogLevel
	switch strings.ToLower(os.Getenv(ClientLogEnv)) {
	case "error":
		level = kgo.LogLevelError
	case "warn":
		level = kgo.LogLevelWarn
	case "info":
		level = kgo.LogLevelInfo
	case "debug":
		level = kgo.LogLevelDebug
	default:
		return nil
	}
	return kgo.BasicLogger(os.Stderr, level, func() string { return time.Now().Format("15:04:05.000000 ") })
}
