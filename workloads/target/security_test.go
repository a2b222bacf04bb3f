package target

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/isrbench/isrbench/internal/clientprops"
	"github.com/isrbench/isrbench/workloads/spec"
)

func TestSpecTargetBlock(t *testing.T) {
	s, err := spec.Parse([]byte(`name: secured
target:
  bootstrap.servers: b1.example:9096,b2.example:9096
  security.protocol: SASL_SSL
  sasl.mechanism: SCRAM-SHA-512
  sasl.jaas.config: org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="` + secPassword + `";
  ssl.truststore.location: /etc/kafka/ca.pem
  ssl.endpoint.identification.algorithm:
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Target != "kafka://b1.example:9096,b2.example:9096" {
		t.Fatalf("target %q", s.Target)
	}
	c, err := s.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Protocol != clientprops.SASLSSL || c.User != "bench" || c.VerifyHostname {
		t.Fatalf("client config %v (verify host names %v)", c, c.VerifyHostname)
	}
	cfg := s.Config()
	if cfg["target.sasl.jaas.config"] != clientprops.Hidden || cfg["target.security.protocol"] != "SASL_SSL" || cfg["target"] != s.Target {
		t.Fatalf("config %v", cfg)
	}
	// RunID hashes the recorded (hidden) config, and a clone keeps the block.
	if c2 := s.Clone(); c2.Client["sasl.mechanism"] != "SCRAM-SHA-512" {
		t.Fatalf("clone lost the target block")
	} else if c2.Client["sasl.mechanism"] = "PLAIN"; s.Client["sasl.mechanism"] != "SCRAM-SHA-512" {
		t.Fatalf("clone shares the target block")
	}
	if err := s.Set("target.sasl.mechanism", "SCRAM-SHA-256"); err != nil || s.Client["sasl.mechanism"] != "SCRAM-SHA-256" {
		t.Fatalf("--set target.sasl.mechanism: %v", err)
	}
	if err := s.CheckClientTarget(s.Target); err != nil {
		t.Fatal(err)
	}
}

func TestSpecTargetBlockRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"target:\n  sasl.kerberos.service.name: kafka\n", `line 2: unknown key "target.sasl.kerberos.service.name": the target block takes bootstrap.servers and the client properties`},
		{"target:\n  security.protocol: [SSL]\n", "target.security.protocol: want a single value, got a list"},
		{"target:\n  security.protocol: SSL\n  security.protocol: SSL\n", `duplicate key "target.security.protocol"`},
		{"target:\n  bootstrap.servers: nohost\n", "target.bootstrap.servers"},
		{"target:\n  security.protocol: TLS\n", `security.protocol "TLS"; allowed PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`},
		{"target:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n  sasl.password: " + secPassword + "\n", "needs a user"},
	} {
		_, err := spec.Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), secPassword) {
			t.Errorf("%q: the error shows the password", tc.yaml)
		}
	}
	s := spec.DefaultSpec()
	if err := s.Set("target.foo", "x"); err == nil || !strings.Contains(err.Error(), `unknown key "target.foo"`) {
		t.Errorf("--set target.foo: %v", err)
	}
	if err := s.Set("target.security.protocol", "SSL"); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"", "embedded"} {
		if err := s.CheckClientTarget(target); err != nil {
			t.Errorf("target %q with target.security.protocol=SSL: %v", target, err)
		}
	}
	if err := s.CheckClientTarget("kfake"); !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "target.security.protocol: kfake runs plaintext") {
		t.Errorf("kfake: %v", err)
	}
	if err := s.Set("target.ssl.ca.location", "/ca.pem"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckClientTarget("embedded"); !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "target.ssl.ca.location: the embedded cluster makes its clients' credentials") {
		t.Errorf("embedded with a CA file: %v", err)
	}
	delete(s.Client, "ssl.ca.location")
	s.InterBrokerProtocol = "SSL"
	if err := s.CheckClientTarget("kafka://h:9092"); !errors.Is(err, spec.ErrTargetSetting) || !strings.Contains(err.Error(), "a kafka:// cluster replicates over its own") {
		t.Errorf("kafka:// with security.inter.broker.protocol=SSL: %v", err)
	}
	if _, err := OpenTarget(context.Background(), "kfake", s, TargetOptions{}); !errors.Is(err, spec.ErrTargetSetting) {
		t.Errorf("OpenTarget kfake with client security: %v", err)
	}
}

// TestOpenTargetRefusesCredentials: a wrong password is ErrTargetConnect with the cause, from
// OpenTarget, before anything else of the run.
func TestOpenTargetRefusesCredentials(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "bench", secPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := spec.DefaultSpec()
	target := "kafka://" + c.ListenAddrs()[0]
	for _, kv := range []string{"target=" + target, "target.security.protocol=SASL_PLAINTEXT", "target.sasl.mechanism=PLAIN",
		"target.sasl.username=bench", "target.sasl.password=wrong-" + secPassword} {
		k, v, _ := strings.Cut(kv, "=")
		if err := s.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = OpenTarget(ctx, target, s, TargetOptions{})
	if !errors.Is(err, ErrTargetConnect) || !errors.Is(err, kerr.SaslAuthenticationFailed) || strings.Contains(err.Error(), secPassword) {
		t.Fatalf("err %v", err)
	}
	s.Client["sasl.password"] = secPassword
	tgt, err := OpenTarget(ctx, target, s, TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if len(TargetSecurity(tgt)) == 0 {
		t.Fatal("the target gives its clients no security options")
	}
}

const secPassword = "spec-Secret-77"
