package adminapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// TestAdminLinks: POST /links/<id>/slow puts the latency on every replica link between the
// broker and the others, both ways (an acks=all produce then waits at least one slowed fetch
// round trip), GET /links lists them, heal clears them; bad parameters are 400 naming what
// was wrong, an unknown broker 404.
func TestAdminLinks(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	st, follower := clustertest.FollowedTopic(t, c, "lnk")
	base := startAdmin(t, c)
	cl := clustertest.NewClient(t, c, kgo.DefaultProduceTopic("lnk"))
	clustertest.Produce(t, cl, "lnk", "warm", 10) // followers fetching

	const lat = 40 * time.Millisecond
	code, body := httpDo(t, "POST", base+"/links/"+itoa(follower)+"/slow?latency=40ms&bandwidth=1000000")
	var links []cluster.LinkStatus
	if err := json.Unmarshal([]byte(body), &links); code != 200 || err != nil || len(links) != 4 {
		t.Fatalf("POST slow: %d %v %s", code, err, body)
	}
	for _, l := range links {
		if (l.From != follower && l.To != follower) || l.LatencyMs != 40 || l.BandwidthBs != 1000000 || l.Down ||
			l.Fault != "latency 40ms bandwidth 1000000 B/s" {
			t.Errorf("link %+v, want 40 ms and 1 MB/s on a link of broker %d", l, follower)
		}
	}
	if code, got := httpDo(t, "GET", base+"/links"); code != 200 || got != body {
		t.Errorf("GET /links: %d %s, want %s", code, got, body)
	}
	// The leader's HW waits for the slowed follower (in the ISR): one replica fetch round trip
	// over the slow link takes two latencies.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lnk", Value: []byte("slow")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*lat {
		t.Errorf("acks=all produce to leader %d took %v with follower %d's links slowed by %v each way", st.Leader, d, follower, lat)
	}

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/links/1/slow", 400, "slow needs latency or bandwidth"},
		{"/links/1/slow?latency=fast", 400, `latency="fast"; allowed a duration`},
		{"/links/1/slow?latency=2m", 400, "allowed a duration 0s..1m"},
		{"/links/1/slow?bandwidth=-5", 400, "an integer >= 0"},
		{"/links/1/slow?jitter=5ms&bandwidth=10", 400, "jitter without latency"},
		{"/links/1/slow?latency=5ms&delay=5ms", 400, `unknown parameter "delay"; allowed latency, jitter, bandwidth`},
		{"/links/1/down?latency=5ms", 400, "down takes no parameters"},
		{"/links/1/cut", 400, `unknown action "cut"`},
		{"/links/9/down", 404, "no broker 9"},
		{"/links/x/down", 400, "not an integer"},
	} {
		if code, body := httpDo(t, "POST", base+tc.path); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s: %d %q, want %d and %q", tc.path, code, body, tc.code, tc.want)
		}
	}
	if code, body := httpDo(t, "GET", base+"/links/1/heal"); code != 405 || !strings.Contains(body, "use POST") {
		t.Errorf("GET /links/1/heal: %d %q", code, body)
	}
	if code, body := httpDo(t, "POST", base+"/links/"+itoa(follower)+"/down"); code != 200 || strings.Count(body, `"down": true`) != 4 {
		t.Errorf("POST down: %d %s", code, body)
	}
	if code, body := httpDo(t, "POST", base+"/links/"+itoa(follower)+"/heal"); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("POST heal: %d %s, want no faulty link", code, body)
	}
	if n := len(c.Links()); n != 0 {
		t.Errorf("after heal %d links are faulty", n)
	}
}
