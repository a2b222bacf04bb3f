package results

import (
	"bytes"
	"strings"
	"testing"
)

func TestTimelineWriteRead(t *testing.T) {
	var buf bytes.Buffer
	tl, err := NewTimeline(&buf, "p0.leader", "p0.epoch", "p0.hw", "p0.leo")
	if err != nil {
		t.Fatal(err)
	}
	rows := []TimelineRow{
		{T: 0.5, RecordsPerS: 1000, MBPerS: 1.024, AckP99Us: 250, HWLagP99Us: 120, ISRMin: 3, ISRMax: 3, Extra: []any{1, int32(0), int64(500), int64(510)}},
		{T: 1, RecordsPerS: 800.25, MBPerS: 0.8, AckP99Us: 900, HWLagP99Us: 700, ISRMin: 2, ISRMax: 3, UnderReplicated: 1, Errors: 4, Extra: []any{1, int32(0), int64(900), 1.5}},
	}
	for _, r := range rows {
		if err := tl.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := tl.Write(TimelineRow{T: 2, Extra: []any{1}}); err == nil || !strings.Contains(err.Error(), "want 4") {
		t.Errorf("short Extra: %v", err)
	}
	if err := tl.Flush(); err != nil {
		t.Fatal(err)
	}
	golden(t, "timeline.csv", buf.Bytes())
	got, extra, err := ReadTimeline(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(extra, ",") != "p0.leader,p0.epoch,p0.hw,p0.leo" || len(got) != 2 {
		t.Fatalf("extra %v rows %d", extra, len(got))
	}
	if got[1].RecordsPerS != 800.25 || got[1].ISRMin != 2 || got[1].Errors != 4 || got[1].Extra[3] != "1.5" {
		t.Errorf("row 1 = %+v", got[1])
	}
	if len(tl.Rows()) != 2 || tl.Rows()[0].Extra != nil {
		t.Errorf("kept rows %+v", tl.Rows())
	}
}

func TestTimelineErrors(t *testing.T) {
	if _, err := NewTimeline(&bytes.Buffer{}, "t_s"); err == nil {
		t.Error("duplicate column accepted")
	}
	if _, err := NewTimeline(&bytes.Buffer{}, ""); err == nil {
		t.Error("empty column accepted")
	}
	for name, in := range map[string]string{
		"header": "a,b\n",
		"order":  "records_per_s,t_s,mb_per_s,ack_p99_us,hw_lag_p99_us,isr_min,isr_max,under_replicated,under_min_isr,errors\n",
		"number": strings.Join(TimelineColumns, ",") + "\n1,x,0,0,0,0,0,0,0,0\n",
		"fields": strings.Join(TimelineColumns, ",") + "\n1,2\n",
	} {
		if _, _, err := ReadTimeline(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
