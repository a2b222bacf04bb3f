// Package load is the load of the isrbench harness: the franz-go producers, their open-loop
// pacer, the consumers and consumer-group members, the durability read-back and the client HW
// observer. It drives a cluster through client options only (it imports spec, not target);
// the runner (package workloads) creates these, starts them and reads their figures.
//
// Every record value starts with the 24-byte Header (producer id, seq, intended send time):
// latencies are measured from the intended time, and CheckDurability matches what it reads
// back against what each producer had acknowledged.
//
// # Open loop
//
// Each producer's Pacer gives record i the intended send time start + i/rate (plus, with
// producers.pacer.dither, the default, a phase within one interval that changes every 64
// records: Pacer.Dither says why) and never skips:
// when behind, it returns at once and the backlog shows up as send delay and as latency, which
// is measured from the intended time (no coordinated omission). Ack latency = ack - intended;
// e2e latency = consumer receive - intended (the record value carries a 24-byte header with
// the intended time, see PutHeader); send delay = actual send - intended.
//
// The wait (producers.pacer, WaitTimerfd by default) is a non-blocking periodic timerfd, armed
// once at the slot interval and read through the runtime poller: the goroutine parks until
// the poller reports an expiration, then one read(2) takes it and a short runtime.Gosched spin
// covers the rest. Expirations come a lead before their slots, the median lateness of the
// last 64 wake-ups (at most TimerfdEarly, 30 µs), so the spin is short where wake-ups are
// prompt. WaitTimerfdOneShot (producers.pacer=timerfd-oneshot) arms a one-shot timer
// TimerfdEarly before every slot instead: three system calls a slot (arm, a read finding
// nothing, the read after the wake-up).
// The goroutine parks while it waits, so its P keeps running the cluster and the clients: a
// blocking read(2) on the timerfd would hold the P, and with two producers on two cores the
// network poller then ran only from sysmon, every ~10 ms (ack p50 81 ms instead of 0.1 ms).
// Measured against a no-op sink on this 2-core Firecracker VM, 5000 slots/s
// (`go test -run '^$' -bench PacerFloor -benchtime 1x ./workloads/load/`), on a quiet machine
// before the periodic timer:
//
//	mode     send delay p50   p99      CPU per slot
//	timerfd  8 µs             18 µs    43 µs  (22% of a core at 5000/s; timer syscalls are costly in this VM)
//	spin     0.13 µs          4 µs     200 µs (a whole core: it sleeps to 200 µs before, then spins)
//	sleep    535 µs           1.07 ms  6 µs   (time.Sleep wakes about 0.5 ms late)
//
// and with a load average of 7-11, eight alternating one-second runs of each: timerfd-oneshot
// 50.8 µs CPU per slot (send delay p50 87 µs), timerfd (periodic) 48.4 µs (101 µs). Most of a
// slot's CPU is the wake-up itself: any way of sleeping and waking a thread (the poller,
// clock_nanosleep, with or without a locked thread) cost 57-75 µs of CPU per wake-up there.
// spin is the most precise but burns a core the embedded cluster needs on a 2-core machine,
// so a timerfd is the default.
//
// # Transactions
//
// A producer with a transactional.id (NewProducer's txnID) sends its records in transactions
// of transaction.records records and commits or aborts each (producer_txn.go); its
// transactions' ranges and outcomes feed CheckTransactions, a read_committed read-back.
// LSOObserver measures the LSO lag, Pipeline is a member of the exactly-once pipeline and
// CheckPipeline its output check. Consumers keep control records (IsolationOpts) so that
// their position passes the commit markers.
//
// # Concurrency
//
// A Producer's histograms are recorded from kgo's promise goroutines through
// results.Recorder; its whole-run state (acknowledged seqs, errors) is read under its lock
// (PartitionErrors, FailedBetween, AckedCount, HasAcked). A Consumer's e2e histogram has its
// Run goroutine as single owner: read it after Run returned. Worker makes a run the K-th of N
// load generators of one spec.
package load
