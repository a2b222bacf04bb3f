package target

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/workloads/spec"
)

// samples are the registry's Samples of e, but for an AtLeast entry's minimum the other
// setting's default: the spec has no key for it.
func samples(e *config.Entry) []string {
	vs := e.Samples()
	if e.AtLeast != "" {
		vs[0] = strconv.FormatInt(config.DefaultOf(e.AtLeast), 10)
	}
	return vs
}

// TestSpecRegistryWalk walks every spec key of a config registry entry: the registry's
// minimum, maximum and default (every mode, both booleans) pass Set and Validate and start
// the embedded cluster the spec describes; one below the minimum fails Set with an error
// naming the key and the range. The netfetch setter and StartCluster are walked the same way
// in netfetch (TestRegistryWalk).
func TestSpecRegistryWalk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := 0
	for _, p := range spec.Params() {
		if p.Entry() == "" {
			continue
		}
		n++
		e := config.Get(p.Entry())
		t.Run(p.Key, func(t *testing.T) {
			for _, v := range samples(e) {
				s := spec.DefaultSpec()
				s.Brokers, s.Topic.ReplicationFactor, s.Topic.MinInsyncReplicas = 1, 1, 1
				// Kafka's rules replica.fetch.wait.max.ms <= replica.lag.time.max.ms and
				// <= replica.socket.timeout.ms.
				if x, err := strconv.ParseInt(v, 10, 64); err == nil {
					switch p.Key {
					case "replica.lag.time.max.ms", "replica.socket.timeout.ms":
						s.Settings, _ = s.Settings.With("replica.fetch.wait.max.ms", strconv.FormatInt(min(x, s.Settings.Int("replica.fetch.wait.max.ms")), 10))
					case "replica.fetch.wait.max.ms":
						s.Settings, _ = s.Settings.With("replica.lag.time.max.ms", strconv.FormatInt(max(x, s.Settings.Int("replica.lag.time.max.ms")), 10))
						s.Settings, _ = s.Settings.With("replica.socket.timeout.ms", strconv.FormatInt(max(x, s.Settings.Int("replica.socket.timeout.ms")), 10))
					}
				}
				if err := s.Set(p.Key, v); err != nil {
					t.Fatalf("Set(%s, %s): %v", p.Key, v, err)
				}
				if err := s.Validate(); err != nil {
					t.Fatalf("%s=%s: Validate: %v", p.Key, v, err)
				}
				cc, err := ClusterConfig(s)
				if err != nil {
					t.Fatalf("%s=%s: ClusterConfig: %v", p.Key, v, err)
				}
				c, err := cluster.Start(ctx, cc)
				if err == nil {
					err = c.Close()
				}
				if err != nil {
					t.Fatalf("%s=%s: StartCluster: %v", p.Key, v, err)
				}
			}
			var below string
			switch {
			case e.Type.Numeric():
				lo := e.Min
				if e.AtLeast != "" {
					lo = config.DefaultOf(e.AtLeast)
				}
				b := lo - 1
				if e.Never && b == -1 {
					b = -2
				}
				below = strconv.FormatInt(b, 10)
				err := spec.DefaultSpec().ApplySets([]string{p.Key + "=" + below})
				want := strconv.FormatInt(lo, 10) + ".."
				if e.AtLeast != "" {
					want = "at least " + strconv.FormatInt(lo, 10) // checked by Validate
				}
				if err == nil || !strings.Contains(err.Error(), p.Key) || !strings.Contains(err.Error(), want) {
					t.Errorf("Set(%s, %s): %v, want an error naming the key and the range from %d", p.Key, below, err, lo)
				}
			case e.Type == config.Duration:
				err := spec.DefaultSpec().Set(p.Key, "-1ns")
				if err == nil || !strings.Contains(err.Error(), p.Key) || !strings.Contains(err.Error(), e.Range()) {
					t.Errorf("Set(%s, -1ns): %v, want an error naming the key and %s", p.Key, err, e.Range())
				}
			default:
				err := spec.DefaultSpec().Set(p.Key, "nope")
				if err == nil || !strings.Contains(err.Error(), p.Key) || !strings.Contains(err.Error(), e.Range()) {
					t.Errorf("Set(%s, nope): %v, want an error naming the key and %s", p.Key, err, e.Range())
				}
			}
		})
	}
	if n < 31 {
		t.Errorf("%d spec keys of registry entries; want every broker key of the registry", n)
	}
}

// TestSpecSettingsReachCluster: a broker setting the spec keeps by its registry name
// (replica.socket.timeout.ms) reaches the cluster's Settings unchanged, and Kafka's rule
// replica.fetch.wait.max.ms <= replica.socket.timeout.ms is checked by Validate.
func TestSpecSettingsReachCluster(t *testing.T) {
	s := spec.DefaultSpec()
	if err := s.ApplySets([]string{"broker.replica.socket.timeout.ms=1234"}); err != nil {
		t.Fatal(err)
	}
	cc, err := ClusterConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Settings.Int("replica.socket.timeout.ms"); got != 1234 || !cc.Settings.IsSet("replica.socket.timeout.ms") {
		t.Errorf("cluster replica.socket.timeout.ms = %d (set %v), want 1234", got, cc.Settings.IsSet("replica.socket.timeout.ms"))
	}
	if got, _ := s.Get("replica.socket.timeout.ms"); got != int64(1234) {
		t.Errorf("spec Get = %v", got)
	}
	// Every setting reaches the cluster as the spec holds it, given or not (the harness's
	// own defaults included), but the two the embedded target sets itself.
	for _, e := range config.Entries() {
		switch e.Name {
		case "min.insync.replicas", "auto.create.topics.enable":
			continue
		}
		if got, want := cc.Settings.Text(e.Name), s.Settings.Text(e.Name); got != want || cc.Settings.IsSet(e.Name) != s.Settings.IsSet(e.Name) {
			t.Errorf("%s: cluster %q (set %v), spec %q (set %v)", e.Name, got, cc.Settings.IsSet(e.Name), want, s.Settings.IsSet(e.Name))
		}
	}
	if cc.Broker.Log.SegmentBytes != spec.DefaultLogSegmentBytes || cc.Broker.Log.RetentionBytes != spec.DefaultLogRetentionBytes {
		t.Errorf("cluster log.segment.bytes %d, log.retention.bytes %d: want the harness's defaults", cc.Broker.Log.SegmentBytes, cc.Broker.Log.RetentionBytes)
	}
	err = spec.DefaultSpec().ApplySets([]string{"replica.socket.timeout.ms=400", "replica.fetch.wait.max.ms=500"})
	if err == nil || !strings.Contains(err.Error(), "replica.socket.timeout.ms (400)") {
		t.Errorf("replica.fetch.wait.max.ms 500 > replica.socket.timeout.ms 400: %v", err)
	}
}
