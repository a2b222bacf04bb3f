package clientprops

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

const testPassword = "Pa55-w0rd!"

func props(kv ...string) Props {
	var p Props
	for i := 0; i+1 < len(kv); i += 2 {
		p = append(p, Property{Key: kv[i], Value: kv[i+1]})
	}
	return p
}

func jaas(module string) string {
	return module + ` required username="alice" password="` + testPassword + `";`
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     Props
		proto Protocol
		mech  string
		user  string
	}{
		{"empty is plaintext", nil, Plaintext, "", ""},
		{"scram jaas", props("security.protocol", "sasl_ssl", "sasl.mechanism", "SCRAM-SHA-512", "sasl.jaas.config", jaas(ScramLoginModule)), SASLSSL, MechScramSHA512, "alice"},
		{"plain jaas", props("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN", "sasl.jaas.config", jaas(PlainLoginModule)), SASLPlaintext, MechPlain, "alice"},
		{"librdkafka names", props("security.protocol", "SASL_SSL", "sasl.mechanisms", "SCRAM-SHA-256", "sasl.username", "bob", "sasl.password", testPassword, "ssl.ca.location", "/x/ca.pem"), SASLSSL, MechScramSHA256, "bob"},
		{"ssl", props("security.protocol", "SSL", "ssl.truststore.location", "/x/ca.pem", "ssl.truststore.type", "PEM"), SSL, "", ""},
		{"oauth file", props("security.protocol", "SASL_SSL", "sasl.mechanism", "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url", "file:///x/token",
			"sasl.jaas.config", OAuthLoginModule+` required extension_traceId="1";`), SASLSSL, MechOAuthBearer, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if c.Protocol != tc.proto || c.Mechanism != tc.mech || c.User != tc.user {
				t.Fatalf("got %s %s %s", c.Protocol, c.Mechanism, c.User)
			}
		})
	}
}

// TestNewRefuses: every refused setting is an error naming the key and the allowed values,
// and no error shows the password.
func TestNewRefuses(t *testing.T) {
	sasl := func(kv ...string) Props { return props(append([]string{"security.protocol", "SASL_SSL"}, kv...)...) }
	for _, tc := range []struct {
		name string
		p    Props
		want string
	}{
		{"protocol", props("security.protocol", "TLS"), `security.protocol "TLS"; allowed PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`},
		{"no mechanism", sasl(), "needs sasl.mechanism (Kafka's default GSSAPI is not supported)"},
		{"gssapi", sasl("sasl.mechanism", "GSSAPI"), "GSSAPI (Kerberos) is not supported"},
		{"unknown mechanism", sasl("sasl.mechanism", "DIGEST-MD5"), `sasl.mechanism "DIGEST-MD5"; allowed PLAIN, SCRAM-SHA-256`},
		{"aws", sasl("sasl.mechanism", "AWS_MSK_IAM"), "AWS_MSK_IAM is not supported in this build"},
		{"mechanism disagree", sasl("sasl.mechanism", "PLAIN", "sasl.mechanisms", "SCRAM-SHA-256"), "disagree"},
		{"module mismatch", sasl("sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config", jaas(PlainLoginModule)), "PlainLoginModule does not go with sasl.mechanism=SCRAM-SHA-256"},
		{"bad jaas", sasl("sasl.mechanism", "PLAIN", "sasl.jaas.config", PlainLoginModule+` required password="`+testPassword), "unterminated"},
		{"no user", sasl("sasl.mechanism", "PLAIN"), "needs a user"},
		{"no password", sasl("sasl.mechanism", "PLAIN", "sasl.username", "alice"), "user alice has no password"},
		{"two credentials", sasl("sasl.mechanism", "PLAIN", "sasl.jaas.config", jaas(PlainLoginModule), "sasl.username", "x", "sasl.password", testPassword), "both give credentials"},
		{"oauth no url", sasl("sasl.mechanism", "OAUTHBEARER"), "needs sasl.oauthbearer.token.endpoint.url=file:///"},
		{"oauth http", sasl("sasl.mechanism", "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url", "https://idp/token"), "only a file:///path/to/token URL"},
		{"oauth unsecured", sasl("sasl.mechanism", "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url", "file:///t", "sasl.jaas.config", OAuthLoginModule+` required unsecuredLoginStringClaim_sub="a";`), "unsecured JWT"},
		{"jks", props("security.protocol", "SSL", "ssl.truststore.type", "JKS"), "ssl.truststore.type JKS: isrbench reads PEM files only"},
		{"two truststores", props("security.protocol", "SSL", "ssl.truststore.location", "a", "ssl.ca.location", "b"), "give one"},
		{"cert without key", props("security.protocol", "SSL", "ssl.certificate.location", "c"), "go together"},
		{"keystore and cert", props("security.protocol", "SSL", "ssl.keystore.location", "k", "ssl.key.location", "c"), "give one"},
		{"endpoint", props("security.protocol", "SSL", "ssl.endpoint.identification.algorithm", "ldap"), `ssl.endpoint.identification.algorithm "ldap"; allowed https`},
		{"tls version", props("security.protocol", "SSL", "ssl.enabled.protocols", "TLSv1.1"), `"TLSv1.1"; allowed TLSv1.2, TLSv1.3`},
		{"tls versions disjoint", props("security.protocol", "SSL", "ssl.protocol", "TLSv1.2", "ssl.enabled.protocols", "TLSv1.3"), "leave no TLS version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testPassword) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
	if _, err := New(props("security.protocol", "SASL_SSL", "sasl.mechanism", "AWS_MSK_IAM")); !errors.Is(err, ErrAWSNotBuilt) {
		t.Fatalf("AWS_MSK_IAM: %v, want ErrAWSNotBuilt", err)
	}
}

func TestIgnoredAndNotes(t *testing.T) {
	c, err := New(props("client.id", "x", "ssl.truststore.location", "/ca.pem", "sasl.mechanism", "PLAIN", "client.id", "y", "ssl.cipher.suites", "A"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Ignored(), ","); got != "client.id,ssl.cipher.suites" {
		t.Fatalf("Ignored %q", got)
	}
	if len(c.Notes()) != 2 {
		t.Fatalf("Notes %q: want one for sasl.* and one for ssl.* under PLAINTEXT", c.Notes())
	}
}

// TestSecretsHidden: the password shows as [hidden] however the Config is printed or encoded.
func TestSecretsHidden(t *testing.T) {
	c, err := New(props("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.jaas.config", jaas(PlainLoginModule),
		"ssl.keystore.password", testPassword, "ssl.key.password", testPassword, "ssl.truststore.location", "/ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(c)
	rd, _ := json.Marshal(c.Redacted())
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s %q", c, *c, *c, c.password, c.password), c.String(), string(js), string(rd)} {
		if strings.Contains(s, testPassword) {
			t.Fatalf("password shown: %s", s)
		}
	}
	r := c.Redacted()
	for _, k := range []string{"sasl.jaas.config", "ssl.keystore.password", "ssl.key.password"} {
		if r[k] != Hidden {
			t.Errorf("Redacted[%s] = %q, want %s", k, r[k], Hidden)
		}
	}
	if r["ssl.truststore.location"] != "/ca.pem" || r["security.protocol"] != "SASL_SSL" {
		t.Errorf("Redacted hides what is not secret: %v", r)
	}
	if got := c.scrub("server said " + testPassword); strings.Contains(got, testPassword) {
		t.Errorf("scrub: %s", got)
	}
}
