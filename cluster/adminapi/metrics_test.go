package adminapi

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
)

// metricValue returns the value of the sample name{labels} in a /metrics text, or -1 when
// there is none (labels in the order the server writes them).
func metricValue(text, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
	if labels == "" {
		re = regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	}
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// waitMetrics polls GET /metrics until cond holds (at most 60 s) and returns the text.
func waitMetrics(t *testing.T, base, what string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, text := httpDo(t, "GET", base+"/metrics")
		if cond(text) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: %s: not within 60 s:\n%s", what, text)
		}
		time.Sleep(20 * time.Millisecond) // polling an HTTP endpoint: no signal to wait on
	}
}

// TestMetricsAsKafka checks each metric against what Kafka reports, through the scenarios of
// the articles: a healthy partition (Log offsets and Partition gauges per replica, the
// followers' lag 0), a paused follower the leader drops from the ISR by replica.lag.time.max.ms
// (IsrShrinksPerSec on the leader, UnderReplicated), its return under a follower throttle
// (the follower-side MaxLag and ConsumerLag above 0 while it is held back, then IsrExpandsPerSec), and
// a stopped follower, which under KRaft the controller removes (not the leader's
// IsrShrinksPerSec).
func TestMetricsAsKafka(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		cfg.Controller.BrokerSessionTimeoutMs = 60_000
		cfg.Broker.ReplicaLagTimeMaxMs = 1000
		cfg.Broker.ReplicaFetchWaitMaxMs = 50
		cfg.Broker.ReplicaFetchMaxBytes = 4096
	})
	st, f := clustertest.FollowedTopic(t, c, "m")
	base := startAdmin(t, c)
	cl := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()))
	clustertest.Produce(t, cl, "m", "a", 50)
	l := itoa(st.Leader)
	pl := func(b int32) string { return `broker="` + itoa(b) + `",topic="m",partition="0"` }

	// Healthy: every replica at LEO = HW = 50, the followers' lag 0.
	text := waitMetrics(t, base, "every replica at HW 50", func(s string) bool {
		for _, b := range st.Replicas {
			if metricValue(s, "kafka_log_log_highwatermark", pl(b)) != 50 {
				return false
			}
		}
		return true
	})
	for _, b := range st.Replicas {
		leader := b == st.Leader
		for _, tc := range []struct {
			name string
			want float64
		}{
			{"kafka_log_log_logendoffset", 50},
			{"kafka_log_log_logstartoffset", 0},
			{"kafka_cluster_partition_underreplicated", 0},
			{"kafka_cluster_partition_insyncreplicascount", map[bool]float64{true: 3, false: 0}[leader]},
			{"kafka_cluster_partition_replicascount", map[bool]float64{true: 3, false: 0}[leader]},
			{"kafka_cluster_partition_atminisr", 0},
			{"kafka_cluster_partition_underminisr", 0},
		} {
			if got := metricValue(text, tc.name, pl(b)); got != tc.want {
				t.Errorf("healthy: %s{%s} = %v, want %v", tc.name, pl(b), got, tc.want)
			}
		}
		if got := metricValue(text, "kafka_server_replicafetchermanager_maxlag", `broker="`+itoa(b)+`",clientId="Replica"`); got != 0 {
			t.Errorf("healthy: MaxLag of broker %d = %v, want 0", b, got)
		}
	}
	consumerLag := `broker="` + itoa(f) + `",clientId="ReplicaFetcherThread-0-` + l + `",topic="m",partition="0"`
	if got := metricValue(text, "kafka_server_fetcherlagmetrics_consumerlag", consumerLag); got != 0 {
		t.Errorf("healthy: ConsumerLag{%s} = %v, want 0\n%s", consumerLag, got, text)
	}
	if !strings.Contains(text, "# TYPE kafka_server_replicamanager_isrshrinks_total counter") {
		t.Errorf("no IsrShrinksPerSec counter:\n%s", text)
	}

	// A paused follower misses the records that follow (acks=1): the leader shrinks the ISR
	// after replica.lag.time.max.ms (AlterPartition), the controller does not. (A follower
	// that stops while nothing is written stays caught up, in the ISR, as in Kafka.)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: kadm.StringPtr("1")}}); err != nil {
		t.Fatal(err) // the cluster-wide default; only the replicas named below are throttled
	}
	// The follower's replica throttled now, while every broker answers: the admin client may
	// send the request to any broker, and a paused one would not answer it. A follower that is
	// caught up has nothing to throttle until it falls behind.
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.replicas", Value: kadm.StringPtr("0:" + itoa(f))}}, "m"); err != nil || rs[0].Err != nil {
		t.Fatalf("throttled replicas: %v %v", err, rs)
	}
	if code, body := httpDo(t, "POST", base+"/brokers/"+itoa(f)+"/pause"); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	acks1 := clustertest.NewClient(t, c, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchMaxBytes(1024))
	clustertest.Produce(t, acks1, "m", "b", 2000)
	text = waitMetrics(t, base, "the leader's ISR shrink", func(s string) bool {
		return metricValue(s, "kafka_server_replicamanager_isrshrinks_total", `broker="`+l+`"`) == 1
	})
	for name, want := range map[string]float64{
		"kafka_cluster_partition_underreplicated":     1,
		"kafka_cluster_partition_insyncreplicascount": 2,
		"kafka_cluster_partition_atminisr":            1,
	} {
		if got := metricValue(text, name, pl(st.Leader)); got != want {
			t.Errorf("after the leader's shrink: %s = %v, want %v", name, got, want)
		}
	}
	if got := metricValue(text, "kafka_server_replicamanager_underreplicatedpartitions", `broker="`+l+`"`); got != 1 {
		t.Errorf("UnderReplicatedPartitions of the leader = %v, want 1", got)
	}
	if got := metricValue(text, "isrbench_controller_isr_shrinks_total", ""); got != 0 {
		t.Errorf("controller ISR shrinks = %v after a leader's shrink, want 0", got)
	}

	// Its return under a follower throttle of 1 byte/s (Kafka's follower.replication.throttled.*):
	// it appends one response, then leaves the partition out of its fetches while the
	// leader's HW is ahead of it, so its lag holds above 0; without the throttle it catches
	// up and rejoins (IsrExpandsPerSec).
	if code, body := httpDo(t, "POST", base+"/brokers/"+itoa(f)+"/resume"); code != 200 {
		t.Fatalf("resume: %d %s", code, body)
	}
	text = waitMetrics(t, base, "the follower's lag above 0", func(s string) bool {
		return metricValue(s, "kafka_server_replicafetchermanager_maxlag", `broker="`+itoa(f)+`",clientId="Replica"`) > 0
	})
	if got := metricValue(text, "kafka_server_fetcherlagmetrics_consumerlag", consumerLag); got <= 0 {
		t.Errorf("catching up: ConsumerLag = %v, want > 0", got)
	}
	if rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.replicas"}}, "m"); err != nil || rs[0].Err != nil {
		t.Fatalf("removing the throttle: %v %v", err, rs)
	}
	text = waitMetrics(t, base, "the follower back in the ISR", func(s string) bool {
		return metricValue(s, "kafka_server_replicamanager_isrexpands_total", `broker="`+l+`"`) == 1 &&
			metricValue(s, "kafka_server_replicafetchermanager_maxlag", `broker="`+itoa(f)+`",clientId="Replica"`) == 0
	})
	if got := metricValue(text, "kafka_cluster_partition_underreplicated", pl(st.Leader)); got != 0 {
		t.Errorf("after the expansion: UnderReplicated = %v, want 0", got)
	}

	// A stopped follower: fenced at once, the controller removes it (KRaft); the leader's
	// IsrShrinksPerSec stays at 1.
	if code, body := httpDo(t, "POST", base+"/brokers/"+itoa(f)+"/stop"); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	text = waitMetrics(t, base, "the controller's ISR shrink", func(s string) bool {
		return metricValue(s, "isrbench_controller_isr_shrinks_total", "") == 1 &&
			metricValue(s, "kafka_cluster_partition_underreplicated", pl(st.Leader)) == 1
	})
	if got := metricValue(text, "kafka_server_replicamanager_isrshrinks_total", `broker="`+l+`"`); got != 1 {
		t.Errorf("after the controller fenced the follower: the leader's IsrShrinksPerSec = %v, want still 1", got)
	}
}
