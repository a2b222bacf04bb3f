package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/isrbench/isrbench/internal/certs"
)

const secPassword = "s3cret-Bench-Pw"

// securedKfake starts a 3-broker kfake with TLS (a CA made here) and SASL (SCRAM-SHA-512 user
// bench, PLAIN user plain), and returns its kafka:// target and the CA file.
func securedKfake(t *testing.T) (target, caFile string) {
	t.Helper()
	ca, err := certs.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("broker", []string{"127.0.0.1"}, true, false)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := srv.TLS()
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{kp}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "bench", secPassword), kfake.User("PLAIN", "plain", secPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return "kafka://" + strings.Join(c.ListenAddrs(), ","), caFile
}

func writeProps(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func scramProps(t *testing.T, caFile, password string) string {
	return writeProps(t, "# SASL_SSL with SCRAM, as for kafka-producer-perf-test --producer.config",
		"security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \`,
		`    username="bench" password="`+password+`";`,
		"ssl.truststore.location="+caFile, "ssl.truststore.type=PEM", "client.id=isrbench-test")
}

// TestRunSecuredTarget: a run and a sweep against a SASL_SSL cluster with --command-config
// pass, and the password is in no output and no file of the run.
func TestRunSecuredTarget(t *testing.T) {
	target, caFile := securedKfake(t)
	props := scramProps(t, caFile, secPassword)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var so, se bytes.Buffer
	err := run(ctx, []string{"run", "--target", target, "--command-config", props, "--duration", "500ms", "--warmup", "0s",
		"--set", "rate=400", "--set", "partitions=2", "--set", "consumers.count=1", "--out", out}, &so, &se)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, se.String())
	}
	if !strings.Contains(se.String(), "client.id") {
		t.Errorf("no note about the unused client.id:\n%s", se.String())
	}
	err = run(ctx, []string{"sweep", "--target", target, "--command-config", props, "--duration", "300ms", "--warmup", "0s",
		"--set", "rate=400", "--set", "partitions=2", "--vary", "acks=all,1", "--out", out}, &so, &se)
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, se.String())
	}
	if strings.Contains(so.String()+se.String(), secPassword) {
		t.Fatalf("the password is in the output")
	}
	files := 0
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files++
		if bytes.Contains(b, []byte(secPassword)) {
			t.Errorf("%s holds the password", path)
		}
		return nil
	})
	if files < 10 {
		t.Fatalf("only %d files written", files)
	}
	m, _ := filepath.Glob(filepath.Join(out, "*-default-*", "result.json"))
	if len(m) == 0 {
		t.Fatal("no result.json")
	}
	b, _ := os.ReadFile(m[0])
	var res struct{ Config map[string]any }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Config["target.sasl.jaas.config"] != "[hidden]" || res.Config["target.security.protocol"] != "SASL_SSL" ||
		res.Config["target.ssl.truststore.location"] != caFile {
		t.Errorf("recorded config: jaas %v, protocol %v, truststore %v", res.Config["target.sasl.jaas.config"],
			res.Config["target.security.protocol"], res.Config["target.ssl.truststore.location"])
	}
}

// TestSecurityRefused: each refused security setting is a usage error (exit 2) naming its
// cause, before the run starts (no run dir), without the password.
func TestSecurityRefused(t *testing.T) {
	target, caFile := securedKfake(t)
	noTrust := writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="`+secPassword+`";`)
	aws := writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=AWS_MSK_IAM")
	bootstrap := strings.TrimPrefix(target, "kafka://")
	runArgs := func(extra ...string) []string {
		return append([]string{"run", "--target", target, "--duration", "300ms", "--warmup", "0s", "--set", "partitions=1"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", runArgs("--command-config", scramProps(t, caFile, secPassword+"x")), "SASL_AUTHENTICATION_FAILED"},
		{"plaintext against TLS", runArgs(), "the server answered with TLS"},
		{"untrusted certificate", runArgs("--command-config", noTrust), "x509: certificate signed by unknown authority"},
		{"aws", runArgs("--command-config", aws), "AWS_MSK_IAM is not supported in this build"},
		{"missing file", runArgs("--command-config", filepath.Join(t.TempDir(), "none.properties")), "no such file"},
		{"embedded target", []string{"run", "--command-config", scramProps(t, caFile, secPassword)}, "the embedded cluster makes its clients' credentials and certificates itself"},
		{"sweep wrong password", []string{"sweep", "--target", target, "--duration", "300ms", "--vary", "acks=all,1",
			"--command-config", scramProps(t, caFile, "nope-"+secPassword)}, "SASL_AUTHENTICATION_FAILED"},
		{"topics wrong password", []string{"topics", "--bootstrap", bootstrap, "--describe", "--command-config", scramProps(t, caFile, "nope"+secPassword)}, "SASL_AUTHENTICATION_FAILED"},
		{"offsets plaintext against TLS", []string{"offsets", "--bootstrap", bootstrap, "--topic", "x", "--command-config", writeProps(t, "client.id=x")}, "the server answered with TLS"},
		{"configs untrusted", []string{"configs", "--bootstrap", bootstrap, "--describe", "--entity-type", "users", "--command-config", noTrust}, "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var so, se bytes.Buffer
			start := time.Now()
			args := tc.args
			if args[0] == "run" || args[0] == "sweep" {
				args = append(args, "--out", out)
			}
			err := run(ctx, args, &so, &se)
			code := exitCode(err, &se)
			if code != 2 || !strings.Contains(se.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, se.String(), tc.want)
			}
			if strings.Contains(so.String()+se.String(), secPassword) {
				t.Fatalf("the password is in the output: %s", se.String())
			}
			if left, _ := os.ReadDir(out); tc.args[0] == "run" && len(left) > 0 {
				t.Errorf("a refused run left %v", left)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s to refuse", d)
			}
		})
	}
}

// TestAdminCommandsSecured: topics, offsets, verify-replicas and configs (SCRAM users) over SASL_SSL; a user
// added with configs --alter --entity-type users can then connect.
func TestAdminCommandsSecured(t *testing.T) {
	target, caFile := securedKfake(t)
	bootstrap := strings.TrimPrefix(target, "kafka://")
	props := scramProps(t, caFile, secPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	do := func(args ...string) string {
		t.Helper()
		var so, se bytes.Buffer
		if err := run(ctx, append(args, "--bootstrap", bootstrap, "--command-config", props), &so, &se); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, se.String())
		}
		if strings.Contains(so.String()+se.String(), secPassword) || strings.Contains(so.String()+se.String(), "alice-pw-123") {
			t.Fatalf("%v: a password is in the output", args)
		}
		return so.String()
	}
	do("topics", "--create", "--topic", "t1", "--partitions", "2", "--replication-factor", "1")
	if out := do("topics", "--describe", "--topic", "t1"); !strings.Contains(out, "t1") {
		t.Fatalf("describe: %s", out)
	}
	if out := do("offsets", "--topic", "t1"); !strings.Contains(out, "t1:1:0:0") {
		t.Fatalf("offsets: %s", out)
	}
	if out := do("verify-replicas", "--topic", "t1"); !strings.Contains(out, "partition t1-1: replicas ") || strings.Count(out, " identical in [0, 0) (0 batches)") != 2 {
		t.Fatalf("verify-replicas: %s", out)
	}
	if out := do("configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-pw-123]"); !strings.Contains(out, "Completed updating config for user alice.") {
		t.Fatalf("alter users: %s", out)
	}
	// kfake refuses two mechanisms of one user in one request (Kafka takes them): two calls;
	// and its server-first message always says 4096 iterations, so the test stays at 4096.
	do("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "SCRAM-SHA-512=[password=alice-pw-123]")
	out := do("configs", "--describe", "--entity-type", "users", "--entity-name", "alice")
	if !strings.Contains(out, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096") {
		t.Fatalf("describe users: %s", out)
	}
	alice := writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-256", "sasl.username=alice", "sasl.password=alice-pw-123", "ssl.ca.location="+caFile)
	var so, se bytes.Buffer
	if err := run(ctx, []string{"topics", "--describe", "--bootstrap", bootstrap, "--command-config", alice}, &so, &se); err != nil {
		t.Fatalf("alice cannot connect: %v\n%s", err, se.String())
	}
	do("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256")
	so.Reset()
	se.Reset()
	err := run(ctx, []string{"topics", "--describe", "--bootstrap", bootstrap, "--command-config", alice}, &so, &se)
	if code := exitCode(err, &se); code != 2 || !strings.Contains(se.String(), "SASL_AUTHENTICATION_FAILED") {
		t.Fatalf("after the delete: exit %d, %s", code, se.String())
	}
}

func TestConfigsUsersUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--alter", "--entity-type", "users", "--add-config", "SCRAM-SHA-256=[password=p1x2y3]"}, "needs --entity-name USER"},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-1=[password=p1x2y3]"}, `config "SCRAM-SHA-1"; allowed SCRAM-SHA-256 and SCRAM-SHA-512`},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[iterations=10,password=p1x2y3]"}, "allowed 4096..16384"},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[iterations=8192]"}, "no password"},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=p1x2y3"}, "want SCRAM-SHA-256=[iterations=N,password=...]"},
		{[]string{"--alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "SCRAM-SHA-256=[salt=1,password=p1x2y3]"}, `unknown field "salt"`},
		{[]string{"--describe", "--entity-type", "users", "--entity-default"}, "no --entity-default"},
		{[]string{"--describe", "--entity-type", "users", "--command-config", "/nonexistent/x.properties"}, "no such file"},
	} {
		var so, se bytes.Buffer
		err := run(context.Background(), append([]string{"configs", "--bootstrap", "127.0.0.1:1"}, tc.args...), &so, &se)
		if code := exitCode(err, &se); code != 2 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, se.String(), tc.want)
		}
		if strings.Contains(se.String(), "p1x2y3") {
			t.Errorf("%v: the password is in the error", tc.args)
		}
	}
}
