package profiles

import (
	"bytes"
	"strings"
	"testing"
)

func TestSplitBySide(t *testing.T) {
	lab := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	p := synth([]synthSample{
		{[]string{"syscall.pwritev", "main"}, 300 * ms, lab(LabelBroker, "1", LabelRole, RoleProduce)},
		{[]string{"broker.isrLoop", "main"}, 20 * ms, lab(LabelBroker, "2", LabelRole, "housekeeping")}, // any role of a broker
		{[]string{"kgo.produce", "main"}, 150 * ms, lab(LabelRole, RoleProducerClient)},
		{[]string{"kgo.fetch", "main"}, 20 * ms, lab(LabelRole, RoleConsumerClient)},
		{[]string{"kgo.fetch", "main"}, 10 * ms, lab(LabelRole, RoleObserverClient)},
		{[]string{"runtime.gcBgMarkWorker", "main"}, 100 * ms, nil},
		{[]string{"workloads.timeline", "main"}, 0, lab(LabelRole, "timeline")},
	})
	sp := SplitOf(p)
	if sp.Cluster != 320*ms || sp.Clients != 180*ms || sp.Other != 100*ms || sp.Samples != 60 { // 600 ms at 10 ms per sample
		t.Fatalf("split = %+v", sp)
	}
	if got := sp.Share(SideCluster); got < 0.533 || got > 0.534 {
		t.Fatalf("cluster share %v, want 320/600", got)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	rs, err := ReadSplit(&buf)
	if err != nil || rs != sp {
		t.Fatalf("ReadSplit = %+v, %v; want %+v", rs, err, sp)
	}
	if _, err := ReadSplit(strings.NewReader("not a profile")); err == nil {
		t.Fatal("ReadSplit of garbage: no error")
	}
	// Top --by role prints the same split.
	var out bytes.Buffer
	if err := top(&out, "x.pprof", p, LabelRole, 1); err != nil {
		t.Fatal(err)
	}
	if want := "Split: cluster 320ms (53.33%), clients 180ms (30.00%), other 100ms (16.67%)"; !strings.Contains(out.String(), want) {
		t.Fatalf("top --by role lacks %q:\n%s", want, out.String())
	}
	if (Split{}).Share(SideCluster) != 0 {
		t.Fatal("empty split share not 0")
	}
}
