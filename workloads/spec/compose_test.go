package spec

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestComposeSpecs: the docker compose specs parse, fault only with exec commands, and name
// containers the compose file has (kafka-{broker} for the brokers' node ids) and the compose
// file by its path from the repository root; they run on a kafka:// target.
func TestComposeSpecs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "specs", "compose", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			ContainerName string            `yaml:"container_name"`
			Environment   map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for name, svc := range compose.Services {
		id := svc.Environment["KAFKA_NODE_ID"]
		if name != "kafka-"+id || svc.ContainerName != name {
			t.Errorf("service %s: container %q, KAFKA_NODE_ID %q: want kafka-<node id> for both", name, svc.ContainerName, id)
		}
		nodes[id] = true
		if !strings.Contains(svc.Environment["KAFKA_ADVERTISED_LISTENERS"], "EXTERNAL://localhost:1909"+id) {
			t.Errorf("service %s advertises %q", name, svc.Environment["KAFKA_ADVERTISED_LISTENERS"])
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("compose services %v, want kafka-1..3", compose.Services)
	}
	specs, _ := filepath.Glob(filepath.Join("..", "specs", "compose", "*.yaml"))
	if len(specs) < 3 {
		t.Fatalf("compose specs %v", specs)
	}
	composeRef := regexp.MustCompile(`docker compose -f "\$\{ISRBENCH_COMPOSE_FILE:-([^}]+)\}"`)
	for _, p := range specs {
		s, err := Load(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, err := CheckTarget("kafka://localhost:19091,localhost:19092,localhost:19093", s); err != nil {
			t.Errorf("%s on a kafka:// target: %v", p, err)
		}
		if len(s.Faults) == 0 {
			t.Errorf("%s has no faults", p)
		}
		for i, f := range s.Faults {
			for _, c := range []string{f.Command, f.Undo} {
				if !strings.Contains(c, "kafka-{broker}") {
					t.Errorf("%s faults[%d]: %q does not name the container kafka-{broker}", p, i, c)
				}
				if m := composeRef.FindStringSubmatch(c); m != nil {
					if _, err := os.Stat(filepath.Join("..", "..", m[1])); err != nil {
						t.Errorf("%s faults[%d]: compose file %s: %v", p, i, m[1], err)
					}
				}
			}
			if f.Target != "" && f.Target[0] >= '0' && f.Target[0] <= '9' && !nodes[f.Target] {
				t.Errorf("%s faults[%d]: broker %s is not a node of docker-compose.yml", p, i, f.Target)
			}
		}
	}
}

// TestServeCrossDCMatchesEmbedded: the cross-dc spec for `isrbench serve` is the embedded
// cross-dc with its slow-link fault done by an exec command: the same settings, the same
// fault time, target and link.
func TestServeCrossDCMatchesEmbedded(t *testing.T) {
	emb, err := Load("cross-dc")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Load(filepath.Join("..", "specs", "serve", "cross-dc.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ec, sc := emb.Config(), srv.Config()
	for k, v := range ec {
		if k != "name" && k != "description" && sc[k] != v {
			t.Errorf("%s: embedded %v, serve %v", k, v, sc[k])
		}
	}
	if len(emb.Faults) != 1 || len(srv.Faults) != 1 {
		t.Fatalf("faults: %d and %d", len(emb.Faults), len(srv.Faults))
	}
	ef, sf := emb.Faults[0], srv.Faults[0]
	want := fmt.Sprintf("latency=%s&jitter=%s&bandwidth=%d", ef.Latency, ef.Jitter, ef.Bandwidth)
	if sf.Kind != "exec" || sf.At != ef.At || sf.Duration != ef.Duration || sf.Target != ef.Target ||
		!strings.Contains(sf.Command, "/slow?"+want) || !strings.Contains(sf.Undo, "/heal") {
		t.Errorf("serve fault %+v does not do the embedded %+v (want %s)", sf, ef, want)
	}
	if _, err := CheckTarget("kafka://127.0.0.1:9092", srv); err != nil {
		t.Error(err)
	}
	if strings.Join(srv.SweepKeys, ",") != "num.replica.fetchers" {
		t.Errorf("serve sweep %v: replica.fetch.max.bytes is swept by restarting serve", srv.SweepKeys)
	}
}

// TestServeCrashRestartSpec: the crash-restart spec for `isrbench serve` crashes three
// different leaders through serve's admin API and starts each again within the session
// timeout, under acks=all; it is valid for a kafka:// target.
func TestServeCrashRestartSpec(t *testing.T) {
	s, err := Load(filepath.Join("..", "specs", "serve", "crash-restart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Producers.Acks != "all" || s.Topic.MinInsyncReplicas != 2 || s.Topic.ReplicationFactor != 3 || len(s.Faults) != 3 {
		t.Fatalf("acks %s, min ISR %d, RF %d, %d faults", s.Producers.Acks, s.Topic.MinInsyncReplicas, s.Topic.ReplicationFactor, len(s.Faults))
	}
	targets := map[string]bool{}
	for i, f := range s.Faults {
		if f.Kind != "exec" || !strings.Contains(f.Command, "/crash") || !strings.Contains(f.Undo, "/start") ||
			f.Duration <= 0 || f.Duration.Milliseconds() >= s.Settings.Int("broker.session.timeout.ms") {
			t.Errorf("fault %d %+v: want an exec crash and start within the session timeout", i, f)
		}
		targets[f.Target] = true
	}
	if len(targets) != 3 {
		t.Errorf("fault targets %v: want three different leaders", targets)
	}
	if _, err := CheckTarget("kafka://127.0.0.1:9092", s); err != nil {
		t.Error(err)
	}
}
