package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/netfetch"
)

// The admin operations of the interop table beyond the suite's: a partition reassignment
// (AlterPartitionReassignments 45, ListPartitionReassignments 46), DescribeConfigs of a topic,
// and a group's committed offsets (OffsetFetch, as an admin client lists them), for the
// clients whose admin API has them: sarama's ClusterAdmin, kafkajs' admin (js/admin.js) and
// confluent-kafka-python's AdminClient (python/confluent_admin.py), as far as the installed
// version has each call; the others show n/a with the reason.

func init() {
	operations = append(operations, "reassign", "describe configs", "group offsets")
}

// errUnsupported marks an operation the client's installed version lacks.
var errUnsupported = errors.New("n/a")

// adminOps is one client's implementation of the admin operations.
type adminOps struct {
	name string
	// reassign moves topic-p to replicas; reassigning lists the partitions of topic with a
	// reassignment in progress.
	reassign     func(boot, topic string, p int32, replicas []int32) error
	reassigning  func(boot, topic string) ([]int32, error)
	topicConfig  func(boot, topic, name string) (string, error)
	groupOffsets func(boot, group, topic string) (map[int32]int64, error)
}

func saramaAdmin() adminOps {
	open := func(boot string) (sarama.ClusterAdmin, error) {
		cfg := sarama.NewConfig()
		cfg.ClientID = "isrbench-interop-admin"
		cfg.Version = sarama.V2_4_0_0 // KIP-455's reassignment APIs
		return sarama.NewClusterAdmin(strings.Split(boot, ","), cfg)
	}
	return adminOps{
		name: "sarama",
		reassign: func(boot, topic string, p int32, replicas []int32) error {
			a, err := open(boot)
			if err != nil {
				return err
			}
			defer a.Close()
			if p != 0 {
				return fmt.Errorf("sarama reassigns partitions 0..n in order; asked for %d", p)
			}
			return a.AlterPartitionReassignments(topic, [][]int32{replicas})
		},
		reassigning: func(boot, topic string) ([]int32, error) {
			a, err := open(boot)
			if err != nil {
				return nil, err
			}
			defer a.Close()
			st, err := a.ListPartitionReassignments(topic, []int32{0})
			if err != nil {
				return nil, err
			}
			var ps []int32
			for p := range st[topic] {
				ps = append(ps, p)
			}
			return ps, nil
		},
		topicConfig: func(boot, topic, name string) (string, error) {
			a, err := open(boot)
			if err != nil {
				return "", err
			}
			defer a.Close()
			es, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{name}})
			if err != nil {
				return "", err
			}
			for _, e := range es {
				if e.Name == name {
					return e.Value, nil
				}
			}
			return "", fmt.Errorf("no config %s in %v", name, es)
		},
		groupOffsets: func(boot, group, topic string) (map[int32]int64, error) {
			a, err := open(boot)
			if err != nil {
				return nil, err
			}
			defer a.Close()
			r, err := a.ListConsumerGroupOffsets(group, nil)
			if err != nil {
				return nil, err
			}
			out := map[int32]int64{}
			for p, b := range r.Blocks[topic] {
				if b.Err != sarama.ErrNoError {
					return nil, fmt.Errorf("partition %d: %v", p, b.Err)
				}
				out[p] = b.Offset
			}
			return out, nil
		},
	}
}

// scriptAdmin runs the admin operations through a script (js/admin.js,
// python/confluent_admin.py); exit status 3 is errUnsupported with the script's reason.
func scriptAdmin(name, dir, interpreter, script string) adminOps {
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, interpreter, append([]string{script}, args...)...)
		cmd.Dir = dir
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			return "", fmt.Errorf("%w (%s)", errUnsupported, strings.TrimPrefix(strings.TrimSpace(errb.String()), "unsupported: "))
		}
		if err != nil {
			return "", fmt.Errorf("%s %s: %v: %s", script, args[0], err, lastLines(errb.String(), 3))
		}
		return out.String(), nil
	}
	offsets := func(out string) (map[int32]int64, error) {
		m := map[int32]int64{}
		for _, l := range lines(out) {
			f := strings.Fields(l)
			if len(f) != 2 {
				return nil, fmt.Errorf("line %q: want \"partition offset\"", l)
			}
			p, err1 := strconv.Atoi(f[0])
			o, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("line %q: want \"partition offset\"", l)
			}
			m[int32(p)] = o
		}
		return m, nil
	}
	return adminOps{
		name: name,
		reassign: func(boot, topic string, p int32, replicas []int32) error {
			var ids []string
			for _, r := range replicas {
				ids = append(ids, strconv.Itoa(int(r)))
			}
			_, err := run("reassign", boot, topic, strconv.Itoa(int(p)), strings.Join(ids, ","))
			return err
		},
		reassigning: func(boot, topic string) ([]int32, error) {
			out, err := run("list-reassignments", boot, topic)
			if err != nil {
				return nil, err
			}
			var ps []int32
			for _, l := range lines(out) {
				p, _, _ := strings.Cut(l, ":")
				n, err := strconv.Atoi(p)
				if err != nil {
					return nil, fmt.Errorf("line %q: want \"partition: replicas adding removing\"", l)
				}
				ps = append(ps, int32(n))
			}
			return ps, nil
		},
		topicConfig: func(boot, topic, name string) (string, error) {
			out, err := run("describe-config", boot, topic, name)
			return strings.TrimSpace(out), err
		},
		groupOffsets: func(boot, group, topic string) (map[int32]int64, error) {
			out, err := run("group-offsets", boot, group, topic)
			if err != nil {
				return nil, err
			}
			return offsets(out)
		},
	}
}

// scriptDeleteRecords returns the suite's deleteRecords step through an admin script.
func scriptDeleteRecords(dir, interpreter, script string) func(boot, topic string, partition int32, offset int64) error {
	return func(boot, topic string, partition int32, offset int64) error {
		_, err := command(60*time.Second, dir, interpreter, script, "delete-records", boot, topic, strconv.Itoa(int(partition)), strconv.FormatInt(offset, 10))
		return err
	}
}

// TestAdminOps runs the admin operations of every installed client against one cluster:
// a reassignment of a loaded partition to another replica set (the controller must end with
// the target and no reassignment listed), a topic config read back, a group's committed
// offsets read back.
func TestAdminOps(t *testing.T) {
	c := startCluster(t)
	boot := c.Bootstrap()
	var clients []adminOps
	clients = append(clients, saramaAdmin())
	if _, err := exec.LookPath("node"); err == nil {
		if _, err := os.Stat("js/node_modules/kafkajs/package.json"); err == nil {
			clients = append(clients, scriptAdmin("kafkajs", "js", "node", "admin.js"))
		}
	}
	if exec.Command(python(), "-c", "import confluent_kafka").Run() == nil {
		clients = append(clients, scriptAdmin("confluent-kafka-python", "python", python(), "confluent_admin.py"))
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(boot, ",")...), kgo.DefaultProduceTopic("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			name := strings.NewReplacer("/", "-", " ", "-").Replace(cl.name)
			topic, group := "admin-"+name, "admin-group-"+name
			resp, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, topic)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 200; i++ {
				kcl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, nil)
			}
			if err := kcl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1})
			if _, err := adm.CommitOffsets(ctx, group, os); err != nil {
				t.Fatal(err)
			}
			adminStep(t, cl.name, "reassign", func() error { return reassignStep(c, cl, boot, topic) })
			adminStep(t, cl.name, "describe configs", func() error {
				v, err := cl.topicConfig(boot, topic, "retention.ms")
				if err == nil && v != "3600000" {
					err = fmt.Errorf("retention.ms = %q, want 3600000", v)
				}
				return err
			})
			adminStep(t, cl.name, "group offsets", func() error {
				got, err := cl.groupOffsets(boot, group, topic)
				if err == nil && (len(got) != 1 || got[0] != 7) {
					err = fmt.Errorf("committed offsets %v, want partition 0 at 7", got)
				}
				return err
			})
		})
	}
}

// adminStep runs one admin operation and records it (errUnsupported: n/a with the reason).
func adminStep(t *testing.T, client, op string, fn func() error) {
	t.Helper()
	start := time.Now()
	err := fn()
	switch {
	case errors.Is(err, errUnsupported):
		record(client, op, oneLine(err.Error()))
	case err != nil:
		record(client, op, "error: "+oneLine(err.Error()))
		t.Errorf("%s: %s: %v", client, op, err)
	default:
		record(client, op, fmt.Sprintf("works (%.1f s)", time.Since(start).Seconds()))
	}
}

// reassignStep moves topic-0 from its two replicas to the third broker and the old leader's
// peer, waits until the controller has the target with nothing adding or removing, and checks
// that the client then lists no reassignment.
func reassignStep(c *cluster.Cluster, cl adminOps, boot, topic string) error {
	st, ok := c.Controller().Partition(topic, 0)
	if !ok {
		return fmt.Errorf("no partition %s-0", topic)
	}
	var target []int32
	var added int32
	for _, id := range c.BrokerIDs() {
		if !slices.Contains(st.Replicas, id) {
			target, added = []int32{id, st.Replicas[1]}, id
		}
	}
	// The new replica cannot fetch until its links heal, so the reassignment is still running
	// when the client lists it (the client's own connections are not replica links).
	for _, id := range c.BrokerIDs() {
		if id != added {
			c.SetLink(id, added, netfetch.LinkFault{Down: true})
		}
	}
	healed := false
	heal := func() {
		if !healed {
			healed = true
			for _, id := range c.BrokerIDs() {
				c.SetLink(id, added, netfetch.LinkFault{})
			}
		}
	}
	defer heal()
	if err := cl.reassign(boot, topic, 0, target); err != nil {
		return err
	}
	ps, err := cl.reassigning(boot, topic)
	if err != nil {
		return fmt.Errorf("listing while it runs: %w", err)
	}
	if !slices.Equal(ps, []int32{0}) {
		return fmt.Errorf("listing while it runs: the client lists partitions %v of %s, want [0]", ps, topic)
	}
	heal()
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, _ := c.Controller().Partition(topic, 0)
		if slices.Equal(now.Replicas, target) && len(now.AddingReplicas) == 0 && len(now.RemovingReplicas) == 0 && len(now.ISR) == 2 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30 s %s-0 is %+v, want replicas %v", topic, now, target)
		}
		time.Sleep(20 * time.Millisecond) // the controller's state, polled with a deadline
	}
	ps, err = cl.reassigning(boot, topic)
	if err != nil {
		return fmt.Errorf("listing after it completed: %w", err)
	}
	if len(ps) != 0 {
		return fmt.Errorf("the client lists partitions %v of %s still reassigning after completion", ps, topic)
	}
	return nil
}
