package workloads

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestClientHWLagAgreesWithCore: on the embedded target the client-observed HW lag (produce
// acknowledgement -> first fetch response showing the HW past the record) and the core's
// (leader append -> HW passes the record) agree within the observer's stated resolution. The
// followers' fetches park replica.fetch.wait.max.ms=40 unless 10 MB are waiting, so the HW
// moves about every 40 ms and the lags spread over tens of milliseconds: an observer that
// looked at the wrong offsets or at the LEO would be off by far more than its resolution.
func TestClientHWLagAgreesWithCore(t *testing.T) {
	s := shortSpec(t, "duration=3s", "warmup=500ms", "producers.rate=1000", "acks=1",
		"replica.fetch.min.bytes=10000000", "replica.fetch.wait.max.ms=40", "consumers.count=0", "hw.lag.client=on")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := Run(ctx, s, Options{OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	core, client, obs := res.HWLagUs, res.HWLagClientUs, res.HWObserver
	if client == nil || obs == nil {
		t.Fatalf("no client HW lag in the result")
	}
	t.Logf("core hw lag p50 %.0f p90 %.0f p99 %.0f µs (%d); client p50 %.0f p90 %.0f p99 %.0f µs (%d); resolution %.0f µs (window p50 %.0f), %d responses, %d before ack, %d unseen",
		core.P50, core.P90, core.P99, core.Count, client.P50, client.P90, client.P99, client.Count,
		obs.ResolutionUs, obs.WindowP50Us, obs.Responses, obs.SeenBeforeAck, obs.Unseen)
	if core.P50 < 5000 {
		t.Fatalf("core HW lag p50 %.0f µs: the parked replica fetches did not spread the lag (test setup)", core.P50)
	}
	if client.Count < core.Count*9/10 || obs.Unseen > client.Count/100 {
		t.Errorf("client HW lag has %d records (%d unseen), the core %d", client.Count, obs.Unseen, core.Count)
	}
	for _, q := range []struct {
		name         string
		core, client float64
	}{{"p50", core.P50, client.P50}, {"p90", core.P90, client.P90}} {
		if d := math.Abs(q.client - q.core); d > obs.ResolutionUs {
			t.Errorf("%s: client %.0f µs, core %.0f µs: differ by %.0f µs, more than the resolution %.0f µs", q.name, q.client, q.core, d, obs.ResolutionUs)
		}
	}
	if send := res.HWLagClientSendUs; send == nil || send.P50 < client.P50 {
		t.Errorf("HW lag from the intended send %+v below the lag from the ack %+v", send, client)
	}
}
