package interop

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/internal/certs"
)

// The suite over SASL_SSL: the cluster replicates over a PLAINTEXT listener and serves the
// clients on a SASL_SSL one (a CA and broker certificates made here; SCRAM users). Each
// client reads the security from its own configuration: kcat and confluent-kafka-python
// (librdkafka) and kafka-python from a librdkafka properties file, sarama and kafkajs from
// their options.

const interopUser, interopPassword = "interop", "interop-Pw-7"

// security is how the clients of a secured suite connect.
type security struct {
	boot  string    // the SASL_SSL listener's bootstrap
	props string    // librdkafka properties (kcat -F, the python scripts)
	ca    string    // the CA file
	kgo   []kgo.Opt // franz-go's options (the admin deletes)
}

func startSecuredCluster(t *testing.T) (*cluster.Cluster, *security) {
	t.Helper()
	files, err := certs.Write(filepath.Join(t.TempDir(), "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, func(cfg *cluster.Config) {
		for _, kv := range []string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "security.inter.broker.protocol=PLAINTEXT",
			"ssl.keystore.location=" + files.BrokerKeystore, "ssl.truststore.location=" + files.CA} {
			if err := cfg.SetKV(kv); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			u, err := cluster.ParseAddScram(m + "=[name=" + interopUser + ",password=" + interopPassword + "]")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Security.Users = append(cfg.Security.Users, u)
		}
	})
	sec := &security{ca: files.CA}
	for _, l := range c.Listeners() {
		if l.Name == "SASL_SSL" {
			sec.boot = l.Bootstrap
		}
	}
	sec.props = filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(sec.props, []byte(strings.Join([]string{"security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
		"sasl.username=" + interopUser, "sasl.password=" + interopPassword, "ssl.ca.location=" + files.CA}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(files.CA)
	pool.AppendCertsFromPEM(pem)
	sec.kgo = []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: interopUser, Pass: interopPassword}.AsSha512Mechanism())}
	return c, sec
}

func TestSASLSSLKcat(t *testing.T) {
	kcat := needKcat(t)
	c, sec := startSecuredCluster(t)
	runSuiteOn(t, c, kcatClientSec(kcat, "kcat SASL_SSL SCRAM-SHA-512", sec), sec.boot)
}

func TestSASLSSLConfluentKafkaPython(t *testing.T) {
	needPython(t, "confluent-kafka-python SASL_SSL SCRAM-SHA-512", "confluent_kafka")
	c, sec := startSecuredCluster(t)
	runSuiteOn(t, c, scriptClientEnv("confluent-kafka-python SASL_SSL SCRAM-SHA-512", []string{"ISRBENCH_INTEROP_CONFIG=" + sec.props},
		"python", python(), "confluent_client.py"), sec.boot)
}

func TestSASLSSLKafkaPython(t *testing.T) {
	needPython(t, "kafka-python SASL_SSL SCRAM-SHA-512", "kafka")
	c, sec := startSecuredCluster(t)
	runSuiteOn(t, c, scriptClientEnv("kafka-python SASL_SSL SCRAM-SHA-512", []string{"ISRBENCH_INTEROP_CONFIG=" + sec.props},
		"python", python(), "kafka_python_client.py"), sec.boot)
}

// sarama has no SCRAM client of its own (it takes a generator built on another library):
// PLAIN over TLS, checked against the same SCRAM credentials.
func TestSASLSSLSarama(t *testing.T) {
	c, sec := startSecuredCluster(t)
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(sec.ca)
	pool.AppendCertsFromPEM(pem)
	runSuiteOn(t, c, saramaClientSec("sarama SASL_SSL PLAIN", func(cfg *sarama.Config) {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = &tls.Config{RootCAs: pool}
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = interopUser, interopPassword
		cfg.Net.SASL.Handshake = true
	}), sec.boot)
}

func TestSASLSSLKafkajs(t *testing.T) {
	if _, err := os.Stat("js/node_modules/kafkajs/package.json"); err != nil {
		need(t, "kafkajs SASL_SSL SCRAM-SHA-256", err)
	}
	c, sec := startSecuredCluster(t)
	runSuiteOn(t, c, scriptClientEnv("kafkajs SASL_SSL SCRAM-SHA-256", []string{"ISRBENCH_INTEROP_CA=" + sec.ca,
		"ISRBENCH_INTEROP_SASL=scram-sha-256:" + interopUser + ":" + interopPassword}, "js", "node", "client.js"), sec.boot)
}
