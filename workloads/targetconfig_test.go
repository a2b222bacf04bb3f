package workloads

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/results"
	"github.com/isrbench/isrbench/workloads/internal/poll"
	"github.com/isrbench/isrbench/workloads/spec"
	"github.com/isrbench/isrbench/workloads/target"
)

// alterLog records the IncrementalAlterConfigs operations a kfake cluster receives.
type alterLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *alterLog) install(c *kfake.Cluster) {
	c.ControlKey(44, func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, r := range req.Resources {
			for _, cfg := range r.Configs {
				res := "brokers"
				if r.ResourceType == kmsg.ConfigResourceTypeTopic {
					res = "topic"
				} else if r.ResourceName != "" {
					res = "broker " + r.ResourceName
				}
				if cfg.Op == kmsg.IncrementalAlterConfigOpDelete {
					l.ops = append(l.ops, fmt.Sprintf("%s %s deleted", res, cfg.Name))
				} else {
					l.ops = append(l.ops, fmt.Sprintf("%s %s=%s", res, cfg.Name, *cfg.Value))
				}
			}
		}
		return nil, nil, false
	})
}

func (l *alterLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ops...)
}

func kfakeCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, "kafka://" + strings.Join(c.ListenAddrs(), ","), kadm.NewClient(cl)
}

// brokerValues is what every broker reports for name ("" where it reports nothing).
func brokerValues(t *testing.T, adm *kadm.Client, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rc := range rcs {
		v := ""
		for _, c := range rc.Configs {
			if c.Key == name {
				v = c.MaybeValue()
			}
		}
		out = append(out, rc.Name+":"+v)
	}
	return out
}

func settingOf(res *results.Result, key string) *results.TargetSetting {
	for i := range res.TargetConfig {
		if res.TargetConfig[i].Key == key {
			return &res.TargetConfig[i]
		}
	}
	return nil
}

// TestSweepAppliesAndRestoresFetchers: a sweep over num.replica.fetchers on a kafka://
// cluster sets each value on the cluster default before its point, result.json records
// what every broker reported, a change from 1 to 4 goes through 2 (Kafka's thread-pool rule),
// and after the last point the original is back.
func TestSweepAppliesAndRestoresFetchers(t *testing.T) {
	c, addr, adm := kfakeCluster(t)
	var log alterLog
	log.install(c)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// The cluster runs 1 fetcher, as a cluster-wide dynamic value of its own.
	one := "1"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.replica.fetchers", Value: &one}}); err != nil {
		t.Fatal(err)
	}
	before := len(log.get())
	s := shortSpec(t, "duration=500ms", "warmup=100ms", "consumers.count=0")
	out, err := Sweep(ctx, s, []spec.Axis{{Key: "num.replica.fetchers", Values: []string{"4", "2"}}}, 1, Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"4", "2"} {
		ts := settingOf(out.Results[i], "num.replica.fetchers")
		if ts == nil || ts.Value != want || ts.How != "incremental-alter-configs" || len(ts.Reported) != 3 {
			t.Fatalf("point %d: target_config num.replica.fetchers = %+v, want %s set on 3 brokers", i, ts, want)
		}
		for b, v := range ts.Reported {
			if v != want {
				t.Errorf("point %d: broker %s reported %s, want %s", i, b, v, want)
			}
		}
		if out.Results[i].Config["num.replica.fetchers"] != int64(mustAtoi(want)) {
			t.Errorf("point %d: config num.replica.fetchers = %v", i, out.Results[i].Config["num.replica.fetchers"])
		}
	}
	ops := log.get()[before:]
	want := []string{
		"brokers num.replica.fetchers=2", "brokers num.replica.fetchers=4", // 1 -> 4 in two steps
		"brokers num.replica.fetchers=2",                                   // point 2
		"brokers num.replica.fetchers=1", "brokers num.replica.fetchers=1", // restore: step to 1, then the default's own value
	}
	if strings.Join(ops, "; ") != strings.Join(want, "; ") {
		t.Fatalf("IncrementalAlterConfigs:\n got %q\nwant %q", ops, want)
	}
	for _, v := range brokerValues(t, adm, "num.replica.fetchers") {
		if !strings.HasSuffix(v, ":1") {
			t.Fatalf("after the sweep brokers report %v, want the original 1", brokerValues(t, adm, "num.replica.fetchers"))
		}
	}
}

func mustAtoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestRunRestoresOnCancel: a run cancelled (Ctrl-C) during its measurement restores the
// setting it changed: the cluster default had none, so it is deleted again.
func TestRunRestoresOnCancel(t *testing.T) {
	c, addr, adm := kfakeCluster(t)
	var log alterLog
	log.install(c)
	s := shortSpec(t, "duration=30s", "warmup=0s", "num.replica.fetchers=3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, s, Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
		done <- err
	}()
	// Cancel once the setting is in effect on every broker.
	why := poll.Until(context.Background(), 30*time.Second, 20*time.Millisecond, func() string {
		for _, v := range brokerValues(t, adm, "num.replica.fetchers") {
			if !strings.HasSuffix(v, ":3") {
				return v
			}
		}
		return ""
	})
	if why != "" {
		t.Fatalf("num.replica.fetchers=3 never in effect: %s", why)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cancelled run did not return")
	}
	ops := log.get()
	if len(ops) == 0 || ops[len(ops)-1] != "brokers num.replica.fetchers deleted" {
		t.Fatalf("IncrementalAlterConfigs %q: want the cluster default's value deleted last", ops)
	}
	for _, v := range brokerValues(t, adm, "num.replica.fetchers") {
		if !strings.HasSuffix(v, ":") {
			t.Fatalf("after the cancelled run brokers report %v, want no value", brokerValues(t, adm, "num.replica.fetchers"))
		}
	}
}

// TestReadOnlySettingRefused: a read-only broker setting (replica.fetch.max.bytes) the
// brokers do not report stops the run before anything happens, naming the key; --assume
// runs it and records the assumption; a sweep over it is refused before the first point.
func TestReadOnlySettingRefused(t *testing.T) {
	_, addr, adm := kfakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := shortSpec(t, "replica.fetch.max.bytes=4194304")
	_, err := Run(ctx, s, Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "replica.fetch.max.bytes=4194304") || !strings.Contains(err.Error(), "--assume replica.fetch.max.bytes=4194304") {
		t.Fatalf("run with a read-only setting: %v", err)
	}
	if td, err := adm.ListTopics(ctx); err != nil || td.Has("isrbench") {
		t.Fatalf("the refused run created its topic (%v)", err)
	}
	assume, err := target.ParseAssume([]string{"replica.fetch.max.bytes=4194304"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, s, Options{Target: addr, OutDir: t.TempDir(), Quiet: true, Assume: assume})
	if err != nil {
		t.Fatal(err)
	}
	if ts := settingOf(res, "replica.fetch.max.bytes"); ts == nil || ts.How != "assumed" || ts.Value != "4194304" {
		t.Fatalf("target_config replica.fetch.max.bytes = %+v", ts)
	}
	err = target.CheckSweepOnTarget(addr, []spec.Axis{{Key: "replica.fetch.max.bytes", Values: []string{"1048576", "4194304"}}}, nil)
	if !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "restarting the brokers") {
		t.Fatalf("sweep over a read-only setting: %v", err)
	}
	if _, err := target.ParseAssume([]string{"producers.rate=5"}); err == nil || !strings.Contains(err.Error(), "not a broker setting") {
		t.Fatalf("--assume of a client setting: %v", err)
	}
	s2 := shortSpec(t, "replica.fetch.max.bytes=1048576")
	if err := s2.ApplyAssume(assume); err == nil || !strings.Contains(err.Error(), "the spec sets replica.fetch.max.bytes=1048576") {
		t.Fatalf("--assume against the spec's own value: %v", err)
	}
}

// TestExistingTopicConfigAlteredAndRestored: a topic that exists with min.insync.replicas=1
// gets the spec's 2 for the run and its own 1 back afterwards; a topic created by the run
// gets the spec's topic settings at creation.
func TestExistingTopicConfigAlteredAndRestored(t *testing.T) {
	_, addr, adm := kfakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := shortSpec(t, "log.segment.bytes=1048576")
	res, err := Run(ctx, s, Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if ts := settingOf(res, "log.segment.bytes"); ts == nil || ts.Config != "segment.bytes" || ts.How != "create-topic" || ts.Reported["topic"] != "1048576" {
		t.Fatalf("target_config log.segment.bytes = %+v", ts)
	}
	one := "1"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: &one}}, "isrbench"); err != nil {
		t.Fatal(err)
	}
	res, err = Run(ctx, shortSpec(t), Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if ts := settingOf(res, "topic.min.insync.replicas"); ts == nil || ts.How != "incremental-alter-configs" || ts.Reported["topic"] != "2" {
		t.Fatalf("target_config topic.min.insync.replicas = %+v", ts)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "isrbench")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("isrbench", nil)
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.MaybeValue() != "1" {
			t.Fatalf("after the run min.insync.replicas = %s, want the topic's own 1 back", c.MaybeValue())
		}
	}
}

// TestHarnessDefaultNotEnforced: a read-only setting the spec lists at the harness's default
// (default.yaml lists log.retention.check.interval.ms=1000, Kafka runs 300000) does not stop a
// run on a cluster that runs another value: result.json records the brokers' value. The same
// setting given at another value is required.
func TestHarnessDefaultNotEnforced(t *testing.T) {
	_, addr, _ := kfakeCluster(t, kfake.BrokerConfigs(map[string]string{"log.retention.check.interval.ms": "300000"}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, shortSpec(t), Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if ts := settingOf(res, "log.retention.check.interval.ms"); ts == nil || ts.How != "cluster-value" || ts.Reported["0"] != "300000" {
		t.Fatalf("target_config log.retention.check.interval.ms = %+v", ts)
	}
	if !strings.Contains(res.Notes["target_config"], "log.retention.check.interval.ms=1000 is the harness default") {
		t.Errorf("notes %q", res.Notes["target_config"])
	}
	_, err = Run(ctx, shortSpec(t, "log.retention.check.interval.ms=2000"), Options{Target: addr, OutDir: t.TempDir(), Quiet: true})
	if !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "broker 0: 300000") {
		t.Fatalf("a non-default read-only setting the brokers do not run: %v", err)
	}
}
