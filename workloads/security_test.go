package workloads

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunEmbeddedSecured: the embedded cluster replicating over SSL with its clients on
// SASL_SSL: the run passes, records both protocols, no fetch byte went zero-copy and the
// bytes that went over TLS are counted; the SASL password it made is in no file.
func TestRunEmbeddedSecured(t *testing.T) {
	s := shortSpec(t, "duration=1s", "warmup=200ms", "producers.rate=1000", "security.inter.broker.protocol=SSL", "target.security.protocol=SASL_SSL")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: out, Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Durability.Acked == 0 || res.Durability.Lost != 0 {
		t.Fatalf("durability %+v", res.Durability)
	}
	if res.Config["security.inter.broker.protocol"] != "SSL" || res.Config["target.security.protocol"] != "SASL_SSL" {
		t.Fatalf("recorded protocols %v, %v", res.Config["security.inter.broker.protocol"], res.Config["target.security.protocol"])
	}
	if res.Cost == nil || res.Cost.BytesZeroCopyPerRecord != 0 || res.Cost.BytesTLSCopyPerRecord < 1000 {
		t.Fatalf("cost %+v: want no zero-copy bytes and the fetch bytes over TLS counted", res.Cost)
	}
	for k := range res.Config {
		if strings.Contains(k, "password") || strings.Contains(k, "username") {
			t.Errorf("recorded %s", k)
		}
	}
}
