package clientprops

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/isrbench/isrbench/internal/certs"
)

// tlsFiles writes a CA, a server certificate for hosts and a client certificate into a temp
// dir, and returns the files and the server's tls.Config.
func tlsFiles(t *testing.T, hosts ...string) (certs.Files, *tls.Config, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("broker", hosts, true, false)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue("client", nil, false, true)
	if err != nil {
		t.Fatal(err)
	}
	f := certs.Files{CA: filepath.Join(dir, "ca.pem"), ClientKeystore: filepath.Join(dir, "client.pem"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	for path, b := range map[string][]byte{f.CA: ca.CertPEM, f.ClientKeystore: append(append([]byte{}, cli.KeyPEM...), cli.CertPEM...),
		f.ClientCert: cli.CertPEM, f.ClientKey: cli.KeyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kp, err := srv.TLS()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return f, &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, pool
}

func fake(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

func check(t *testing.T, addr string, p Props) error {
	t.Helper()
	c, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Check(ctx, []string{addr}, c)
}

func wantCheckErr(t *testing.T, err error, want string) {
	t.Helper()
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("err %v (%T), want a *CheckError", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err %q, want %q", err, want)
	}
	if strings.Contains(err.Error(), testPassword) {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestCheckSASL(t *testing.T) {
	addr := fake(t, kfake.EnableSASL(), kfake.Superuser(MechScramSHA256, "admin", testPassword),
		kfake.User(MechPlain, "alice", testPassword), kfake.User(MechScramSHA512, "bob", testPassword))
	user := func(mech, module, name, pass string) Props {
		return props("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", mech,
			"sasl.jaas.config", module+` required username="`+name+`" password="`+pass+`";`)
	}
	for _, tc := range []struct {
		name string
		p    Props
	}{
		{"PLAIN", user(MechPlain, PlainLoginModule, "alice", testPassword)},
		{"SCRAM-SHA-256", user(MechScramSHA256, ScramLoginModule, "admin", testPassword)},
		{"SCRAM-SHA-512", user(MechScramSHA512, ScramLoginModule, "bob", testPassword)},
		{"librdkafka names", props("security.protocol", "SASL_PLAINTEXT", "sasl.mechanisms", "SCRAM-SHA-512", "sasl.username", "bob", "sasl.password", testPassword)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := check(t, addr, tc.p); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		err := check(t, addr, user(MechScramSHA512, ScramLoginModule, "bob", testPassword+"x"))
		wantCheckErr(t, err, "SASL_AUTHENTICATION_FAILED")
		wantCheckErr(t, err, "user bob")
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("err %v does not wrap kerr.SaslAuthenticationFailed", err)
		}
	})
	t.Run("unknown user", func(t *testing.T) {
		wantCheckErr(t, check(t, addr, user(MechPlain, PlainLoginModule, "mallory", testPassword)), "SASL_AUTHENTICATION_FAILED")
	})
	t.Run("no SASL", func(t *testing.T) {
		wantCheckErr(t, check(t, addr, nil), "requires SASL")
	})
}

func TestCheckTLS(t *testing.T) {
	files, srvTLS, _ := tlsFiles(t, "127.0.0.1")
	addr := fake(t, kfake.TLS(srvTLS))
	ssl := func(kv ...string) Props { return props(append([]string{"security.protocol", "SSL"}, kv...)...) }
	for _, tc := range []struct {
		name string
		p    Props
	}{
		{"truststore", ssl("ssl.truststore.location", files.CA, "ssl.truststore.type", "PEM")},
		{"ca.location", ssl("ssl.ca.location", files.CA)},
		{"inline", ssl("ssl.truststore.certificates", readFile(t, files.CA))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := check(t, addr, tc.p); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("untrusted", func(t *testing.T) {
		wantCheckErr(t, check(t, addr, ssl()), "x509: certificate signed by unknown authority")
	})
	t.Run("plaintext against TLS", func(t *testing.T) {
		wantCheckErr(t, check(t, addr, nil), "the server answered with TLS")
	})
	t.Run("TLS against plaintext", func(t *testing.T) {
		// kfake reads a TLS ClientHello as the size of a huge request and waits for it: the
		// handshake times out, then a plaintext ApiVersions finds the cause.
		plain := fake(t)
		c, _ := New(ssl("ssl.ca.location", files.CA))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		wantCheckErr(t, Check(ctx, []string{plain}, c), "the server answered without TLS")
	})
	t.Run("missing CA file", func(t *testing.T) {
		err := check(t, addr, ssl("ssl.ca.location", filepath.Join(t.TempDir(), "nope.pem")))
		if err == nil || !strings.Contains(err.Error(), "trusted CAs") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("CA file not PEM", func(t *testing.T) {
		jks := filepath.Join(t.TempDir(), "ts.jks")
		os.WriteFile(jks, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600)
		err := check(t, addr, ssl("ssl.truststore.location", jks))
		if err == nil || !strings.Contains(err.Error(), "holds no PEM CERTIFICATE block") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestCheckHostname(t *testing.T) {
	files, srvTLS, _ := tlsFiles(t, "broker.example")
	addr := fake(t, kfake.TLS(srvTLS))
	wantCheckErr(t, check(t, addr, props("security.protocol", "SSL", "ssl.ca.location", files.CA)), "does not name this host")
	if err := check(t, addr, props("security.protocol", "SSL", "ssl.ca.location", files.CA, "ssl.endpoint.identification.algorithm", "")); err != nil {
		t.Fatalf("without the host name check: %v", err)
	}
	// Skipping the host name check still verifies the chain.
	wantCheckErr(t, check(t, addr, props("security.protocol", "SSL", "ssl.endpoint.identification.algorithm", "")), "unknown authority")
}

func TestCheckMTLS(t *testing.T) {
	files, srvTLS, pool := tlsFiles(t, "127.0.0.1")
	srvTLS.ClientAuth, srvTLS.ClientCAs = tls.RequireAndVerifyClientCert, pool
	addr := fake(t, kfake.TLS(srvTLS))
	ssl := func(kv ...string) Props {
		return props(append([]string{"security.protocol", "SSL", "ssl.truststore.location", files.CA}, kv...)...)
	}
	if err := check(t, addr, ssl("ssl.keystore.location", files.ClientKeystore, "ssl.keystore.type", "PEM")); err != nil {
		t.Fatalf("PEM keystore: %v", err)
	}
	if err := check(t, addr, ssl("ssl.certificate.location", files.ClientCert, "ssl.key.location", files.ClientKey)); err != nil {
		t.Fatalf("certificate and key: %v", err)
	}
	if err := check(t, addr, ssl("ssl.keystore.certificate.chain", readFile(t, files.ClientCert), "ssl.keystore.key", readFile(t, files.ClientKey))); err != nil {
		t.Fatalf("inline: %v", err)
	}
	wantCheckErr(t, check(t, addr, ssl()), "refused the client certificate")
	// A key that is not the certificate's.
	other, _, _ := tlsFiles(t, "127.0.0.1")
	err := check(t, addr, ssl("ssl.certificate.location", files.ClientCert, "ssl.key.location", other.ClientKey))
	if err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Fatalf("mismatched key: %v", err)
	}
}

func TestCheckSASLSSL(t *testing.T) {
	files, srvTLS, _ := tlsFiles(t, "127.0.0.1")
	addr := fake(t, kfake.TLS(srvTLS), kfake.EnableSASL(), kfake.Superuser(MechScramSHA512, "admin", testPassword))
	p := props("security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512", "ssl.truststore.location", files.CA,
		"sasl.jaas.config", ScramLoginModule+` required username="admin" password="`+testPassword+`";`)
	if err := check(t, addr, p); err != nil {
		t.Fatal(err)
	}
	p[0].Value = "SASL_PLAINTEXT"
	wantCheckErr(t, check(t, addr, p), "the server answered with TLS")
}

// TestCheckNoAnswer: a listener that accepts and never answers gives an error at the deadline,
// not a hang.
func TestCheckNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, _ := New(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = Check(ctx, []string{ln.Addr().String()}, c)
	wantCheckErr(t, err, "no answer in time")
	if ce := (*CheckError)(nil); !errors.As(err, &ce) || !ce.Unreachable {
		t.Fatalf("%v: want Unreachable", err)
	}
}

func TestCheckRefusedPort(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c, _ := New(nil)
	err := Check(context.Background(), []string{addr}, c)
	wantCheckErr(t, err, "connection refused")
	if ce := (*CheckError)(nil); !errors.As(err, &ce) || !ce.Unreachable {
		t.Fatalf("%v: want Unreachable", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOAuthToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("  eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.  \n"), 0o600)
	c, err := New(props("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url", "file://"+tok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Opts(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tok, []byte("two words"), 0o600)
	if _, err := c.Opts(); err == nil || !strings.Contains(err.Error(), "want one token") || strings.Contains(err.Error(), "two words") {
		t.Fatalf("two words: %v", err)
	}
	os.Remove(tok)
	if _, err := c.Opts(); err == nil || !strings.Contains(err.Error(), "OAUTHBEARER token") {
		t.Fatalf("missing file: %v", err)
	}
}
