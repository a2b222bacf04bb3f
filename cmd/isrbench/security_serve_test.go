package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunAgainstSecuredServe: `isrbench serve` with a SASL_SSL listener (certificates from
// --generate-tls, a SCRAM user from --add-scram, replication over SASL_SSL too), driven from
// outside by `isrbench run --command-config`: the run passes and no file of it holds the
// password; a wrong password and a plaintext client are refused with exit 2; configs adds a
// user that can then log in. With kcat installed, kcat reads the same properties file.
func TestRunAgainstSecuredServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts serve")
	}
	bin := buildIsrbench(t)
	tlsDir := filepath.Join(t.TempDir(), "tls")
	sp := startServeProc(t, bin, "--generate-tls", tlsDir, "--set", "listeners=SASL_SSL://127.0.0.1:0",
		"--set", "security.inter.broker.protocol=SASL_SSL", "--add-scram", "SCRAM-SHA-512=[name=bench,password="+secPassword+"]")
	ca := filepath.Join(tlsDir, "ca.pem")
	// librdkafka's names, which isrbench and kcat -F both read.
	props := writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=bench",
		"sasl.password="+secPassword, "ssl.ca.location="+ca)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	runBin := func(args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, bin, args...)
		var o bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &o
		err := cmd.Run()
		if strings.Contains(o.String(), secPassword) {
			t.Errorf("%v: the password is in the output", args)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), o.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, o.String()
	}
	target := "kafka://" + sp.bootstrap
	code, o := runBin("run", "--target", target, "--command-config", props, "--duration", "2s", "--warmup", "500ms",
		"--set", "rate=500", "--set", "partitions=3", "--out", out)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, o)
	}
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secPassword)) {
				t.Errorf("%s holds the password", path)
			}
		}
		return err
	})
	for _, tc := range []struct {
		name  string
		props string
		want  string
	}{
		{"wrong password", writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=bench", "sasl.password=x"+secPassword, "ssl.ca.location="+ca), "SASL_AUTHENTICATION_FAILED"},
		{"plaintext", writeProps(t, "client.id=x"), "the server answered with TLS"},
		{"untrusted", writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=bench", "sasl.password="+secPassword), "certificate signed by unknown authority"},
	} {
		code, o := runBin("run", "--target", target, "--command-config", tc.props, "--duration", "1s", "--out", t.TempDir())
		if code != 2 || !strings.Contains(o, tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s", tc.name, code, tc.want, o)
		}
	}
	bootstrap := sp.bootstrap
	if code, o := runBin("configs", "--bootstrap", bootstrap, "--command-config", props, "--alter", "--entity-type", "users",
		"--entity-name", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-pw-1]"); code != 0 {
		t.Fatalf("configs --alter users: exit %d\n%s", code, o)
	}
	carol := writeProps(t, "security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-256", "sasl.username=carol", "sasl.password=carol-pw-1", "ssl.ca.location="+ca)
	if code, o := runBin("topics", "--bootstrap", bootstrap, "--command-config", carol, "--describe"); code != 0 || !strings.Contains(o, "isrbench") {
		t.Fatalf("carol: exit %d\n%s", code, o)
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Log("kcat not installed: the kcat leg is skipped")
		return
	}
	kc := exec.CommandContext(ctx, kcat, "-F", props, "-b", bootstrap, "-t", "isrbench", "-C", "-o", "beginning", "-c", "5", "-e", "-q")
	if o, err := kc.CombinedOutput(); err != nil || strings.Count(string(o), "\n") < 5 {
		t.Fatalf("kcat -F %s: %v\n%s", props, err, o)
	}
}
