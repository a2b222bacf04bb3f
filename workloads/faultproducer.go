package workloads

import (
	"context"
	"fmt"
	"time"

	"github.com/isrbench/isrbench/workloads/spec"
)

// runProducerRestart applies restart-producer fault i (spec/faults.go): at its time it kills
// the target transactional producer in its next open transaction and restarts it with the
// same transactional.id (load.Producer.Restart); the fault's detail says what the new
// instance got and how the zombie's commit was refused. It acts on the harness's own
// producer, so every target runs it.
// restartGrace is how long after the measurement a restart-producer fault still waits for the
// producer to take it.
const restartGrace = 5 * time.Second

func (fr *faultRunner) runProducerRestart(ctx context.Context, i int, f spec.Fault) {
	log, measureStart, measureEnd := fr.log, fr.measureStart, fr.measureEnd
	_, rf, ok := fr.startAt(ctx, f, fmt.Sprintf("faults[%d]: restart-producer %s", i, f.Target))
	if !ok {
		return
	}
	defer func() { log.add(i, rf) }()
	n, err := spec.ParseProducerTarget("target", f.Target, producerTotal(fr.in.spec))
	if err != nil {
		rf.Error = err.Error()
		return
	}
	rf.Target = fmt.Sprintf("producer=%d", n)
	pr := fr.cl.producerByNumber(n)
	if pr == nil {
		rf.Error = fmt.Sprintf("producer %d does not run in this worker", n)
		return
	}
	// The restart waits for the producer's next open transaction, at the latest until a
	// little after the end of the measurement: a producer that reaches the end with a
	// transaction open is killed in that one (on a slow machine the load can end before any
	// transaction got half its records), and it reaches the end after its last send returned.
	rctx, cancel := context.WithDeadline(ctx, measureEnd.Add(restartGrace))
	defer cancel()
	rep := pr.Restart(rctx)
	rf.EndS = time.Since(measureStart).Seconds()
	if rep.TxnID != "" {
		rf.Target += " transactional.id=" + rep.TxnID
	}
	if rep.Err != nil {
		rf.Error = rep.Err.Error()
		fr.in.notef("fault %d restart-producer %s: %v", i, f.Target, rep.Err)
		return
	}
	rf.Detail += fmt.Sprintf(": killed in a transaction of %d records; the new instance got producer id %d epoch %d; the zombie's commit was refused with %s",
		rep.Killed, rep.ProducerID, rep.Epoch, rep.ZombieErr)
}
