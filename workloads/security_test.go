package workloads

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/netfetch"
	"github.com/isrbench/isrbench/workloads/target"
)

// TestRunEmbeddedSecured: the embedded cluster replicating over SSL with its clients on
// SASL_SSL: the run passes, records both protocols, no fetch byte went zero-copy and the
// bytes that went over TLS are counted; the SASL password it made is in no file.
//
// The TLS bytes are checked over the whole run, not per record of the measurement window: on
// a loaded machine (or under -race) the clients' TLS and SASL handshakes can outlast the
// warm-up, so the records of the window may be sent only while the producers drain, after the
// window's counters were taken. Over the whole run, acks=all with min.insync.replicas 2 means
// a follower fetched every acknowledged record over TLS before it was acknowledged, at any
// speed.
func TestRunEmbeddedSecured(t *testing.T) {
	s := shortSpec(t, "duration=1s", "warmup=200ms", "producers.rate=1000", "security.inter.broker.protocol=SSL", "target.security.protocol=SASL_SSL")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The embedded cluster's own counters start at zero: read just before it closes, they
	// cover the whole run.
	var run netfetch.Cost
	counted := false
	res, err := Run(ctx, s, Options{OutDir: out, Quiet: true, beforeClose: func(tgt target.Target) {
		if cc, ok := tgt.(target.CostCounter); ok {
			run, counted = cc.Cost().Net, true
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !counted {
		t.Fatal("the embedded target has no cost counters")
	}
	if res.Durability.Acked == 0 || res.Durability.Lost != 0 {
		t.Fatalf("durability %+v", res.Durability)
	}
	if res.Config["security.inter.broker.protocol"] != "SSL" || res.Config["target.security.protocol"] != "SASL_SSL" {
		t.Fatalf("recorded protocols %v, %v", res.Config["security.inter.broker.protocol"], res.Config["target.security.protocol"])
	}
	if res.Cost == nil || res.Cost.BytesZeroCopyPerRecord != 0 {
		t.Fatalf("cost %+v: want no zero-copy bytes", res.Cost)
	}
	// Every acknowledged record went to at least one follower over TLS (min ISR 2): its value
	// alone is message.size bytes.
	if want := res.Durability.Acked * int64(s.Producers.MessageSize); run.SendfileBytes != 0 || run.TLSCopyBytes < want {
		t.Fatalf("whole run: %d bytes sent with sendfile (want 0), %d fetch record bytes over TLS (want >= %d: %d acknowledged records of %d bytes)",
			run.SendfileBytes, run.TLSCopyBytes, want, res.Durability.Acked, s.Producers.MessageSize)
	}
	for k := range res.Config {
		if strings.Contains(k, "password") || strings.Contains(k, "username") {
			t.Errorf("recorded %s", k)
		}
	}
}
