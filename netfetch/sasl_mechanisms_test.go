package netfetch

import (
	"context"
	"crypto/pbkdf2"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/isrbench/isrbench/core/controller"
)

// fakeCreds is a user database for the mechanisms' tests.
type fakeCreds map[string][]controller.ScramCredential

func (f fakeCreds) ScramCredentialOf(user, mech string) (controller.ScramCredential, bool) {
	for _, c := range f[user] {
		if c.Mechanism == mech {
			return c, true
		}
	}
	return controller.ScramCredential{}, false
}

func (f fakeCreds) ScramCredentialsOf(user string) []controller.ScramCredential { return f[user] }

func testCreds(t testing.TB) fakeCreds {
	f := fakeCreds{}
	for _, u := range []struct{ user, mech, pw string }{{"alice", controller.ScramSHA256, "alice-pw"}, {"alice", controller.ScramSHA512, "alice-pw"}, {"bob", controller.ScramSHA512, "bob-pw"}} {
		h := controller.ScramHash(u.mech)
		salt := []byte("salt-" + u.user)
		sp, err := pbkdf2.Key(h, u.pw, salt, 4096, h().Size())
		if err != nil {
			t.Fatal(err)
		}
		c, err := controller.NewScramCredential(u.mech, salt, sp, 4096)
		if err != nil {
			t.Fatal(err)
		}
		f[u.user] = append(f[u.user], c)
	}
	return f
}

// exchange runs franz-go's client mechanism against the server's, as kgo does over
// SaslAuthenticate.
func exchange(t *testing.T, client sasl.Mechanism, creds credentials) (string, error) {
	t.Helper()
	srv := newMechanism(client.Name(), creds)
	sess, out, err := client.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		in, done, err := srv.step(out)
		if err != nil {
			return "", err
		}
		cdone, next, err := sess.Challenge(in)
		if err != nil {
			return "", err
		}
		if done != cdone {
			// PLAIN: the server is done after one step, the client after the empty answer.
			if !done {
				t.Fatalf("client done at step %d, server not", i)
			}
		}
		if done {
			return srv.user(), nil
		}
		out = next
	}
	t.Fatal("no end after 5 steps")
	return "", nil
}

func TestSASLMechanisms(t *testing.T) {
	creds := testCreds(t)
	for _, tc := range []struct {
		name   string
		client sasl.Mechanism
		user   string
	}{
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism(), "alice"},
		{"PLAIN against a SHA-512 credential", plain.Auth{User: "bob", Pass: "bob-pw"}.AsMechanism(), "bob"},
		{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism(), "alice"},
		{"SCRAM-SHA-512", scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha512Mechanism(), "bob"},
		{"SCRAM user name escapes", scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism(), "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := exchange(t, tc.client, creds)
			if err != nil || user != tc.user {
				t.Fatalf("user %q, err %v", user, err)
			}
		})
	}
}

// TestSCRAMLibrdkafkaNonce: librdkafka sends its client nonce again in front of the
// server-first's nonce in its client-final; Kafka accepts a nonce that ends with the
// server's, and so does the server here.
func TestSCRAMLibrdkafkaNonce(t *testing.T) {
	creds := testCreds(t)
	client := scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism()
	srv := newMechanism(controller.ScramSHA256, creds).(*scramServer)
	sess, first, err := client.Authenticate(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	sf, _, err := srv.step(first)
	if err != nil {
		t.Fatal(err)
	}
	_, final, err := sess.Challenge(sf)
	if err != nil {
		t.Fatal(err)
	}
	cnonce := strings.TrimPrefix(string(first), "n,,n=alice,r=")
	// Re-sign the client-final with the doubled nonce, as librdkafka computes it.
	doubled := strings.Replace(string(final), "r="+srv.nonce, "r="+cnonce+srv.nonce, 1)
	withoutProof := doubled[:strings.LastIndex(doubled, ",p=")]
	cred, _ := creds.ScramCredentialOf("alice", controller.ScramSHA256)
	salted, _ := pbkdf2.Key(controller.ScramHash(controller.ScramSHA256), "alice-pw", cred.Salt, int(cred.Iterations), 32)
	clientKey := hmacSum(controller.ScramHash(controller.ScramSHA256), salted, "Client Key")
	sig := hmacSum(controller.ScramHash(controller.ScramSHA256), cred.StoredKey, srv.clientFirstBare+","+srv.serverFirst+","+withoutProof)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	if _, done, err := srv.step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))); err != nil || !done {
		t.Fatalf("librdkafka's client-final: done %v, %v", done, err)
	}
}

// TestSASLMechanismsRefuse: a wrong password, an unknown user and a mechanism the user has
// no credential for are SASL_AUTHENTICATION_FAILED with Kafka's message; nothing echoes
// the password.
func TestSASLMechanismsRefuse(t *testing.T) {
	creds := testCreds(t)
	for _, tc := range []struct {
		name   string
		client sasl.Mechanism
	}{
		{"PLAIN wrong password", plain.Auth{User: "alice", Pass: "Wrong-Pw-1"}.AsMechanism()},
		{"PLAIN unknown user", plain.Auth{User: "mallory", Pass: "Wrong-Pw-1"}.AsMechanism()},
		{"SCRAM wrong password", scram.Auth{User: "alice", Pass: "Wrong-Pw-1"}.AsSha256Mechanism()},
		{"SCRAM unknown user", scram.Auth{User: "mallory", Pass: "Wrong-Pw-1"}.AsSha256Mechanism()},
		{"SCRAM no credential for the mechanism", scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism()},
		{"SCRAM delegation token", scram.Auth{User: "alice", Pass: "alice-pw", IsToken: true}.AsSha256Mechanism()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exchange(t, tc.client, creds)
			var af *authFailed
			if err == nil || (!errors.As(err, &af) && !strings.Contains(err.Error(), "malformed")) {
				t.Fatalf("err %v, want an authentication failure", err)
			}
			if strings.Contains(err.Error(), "Wrong-Pw-1") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

func TestSCRAMServerRefusesMalformed(t *testing.T) {
	creds := testCreds(t)
	first := func(s *scramServer) {
		if _, _, err := s.step([]byte("n,,n=alice,r=abc")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, msg, want string
		after           bool // a client-final after a good client-first
	}{
		{"no gs2", "n=alice,r=abc", "unknown GS2", false},
		{"channel binding", "p=tls-unique,,n=alice,r=abc", "channel binding is not supported", false},
		{"no nonce", "n,,n=alice", "want n=user,r=nonce", false},
		{"empty user", "n,,n=,r=abc", "empty user name", false},
		{"bad escape", "n,,n=al=ice,r=abc", "bad = escape", false},
		{"authzid differs", "n,a=bob,n=alice,r=abc", "authzid must match", false},
		{"extension", "n,,n=alice,r=abc,tokenauth=true", "extensions", false},
		{"nonce not printable", "n,,n=alice,r=a\x01b", "not printable", false},
		{"final without proof", "c=biws,r=abcX", "no proof", true},
		{"final bad proof", "c=biws,r=abcX,p=!!", "not base64", true},
		{"final wrong nonce", "c=biws,r=zzz,p=AAAA", "nonce does not match", true},
		{"final binding", "c=eSws,r=%s,p=AAAA", "channel binding", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newMechanism(controller.ScramSHA256, creds).(*scramServer)
			msg := tc.msg
			if tc.after {
				first(s)
				msg = strings.Replace(msg, "%s", s.nonce, 1)
			}
			_, _, err := s.step([]byte(msg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	s := newMechanism(controller.ScramSHA256, creds).(*scramServer)
	first(s)
	if _, _, err := s.step([]byte("c=biws,r=" + s.nonce + ",p=AAAA")); err == nil {
		t.Fatal("a short proof passed")
	}
	if _, _, err := s.step([]byte("c=biws,r=" + s.nonce + ",p=AAAA")); err == nil || !strings.Contains(err.Error(), "already complete") {
		t.Fatalf("a step after the end: %v", err)
	}
	for _, msg := range []string{"alice", "\x00alice", "\x00alice\x00", "x\x00alice\x00alice-pw", "a\x00b\x00c\x00d"} {
		if _, _, err := newMechanism("PLAIN", creds).step([]byte(msg)); err == nil {
			t.Errorf("PLAIN %q passed", msg)
		}
	}
}

// FuzzSCRAMServer: any client messages give an answer or an error, never a panic, and never
// authenticate without the password.
func FuzzSCRAMServer(f *testing.F) {
	f.Add("n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA")
	f.Add("y,a=alice,n=alice,r=x", "c=eSxhPWFsaWNlLA==,r=x,p=")
	f.Add("n,,n=a=2Cb=3D,r=%%", ",p=,p=")
	creds := testCreds(f)
	f.Fuzz(func(t *testing.T, first, final string) {
		s := newMechanism(controller.ScramSHA256, creds).(*scramServer)
		if _, done, err := s.step([]byte(first)); err != nil || done {
			return
		}
		final = strings.Replace(final, "%N", s.nonce, 1)
		if _, done, err := s.step([]byte(final)); err == nil || done {
			t.Fatalf("authenticated without the password: %q %q", first, final)
		}
	})
}

// FuzzSASLParsers: the message parsers take any bytes without a panic.
func FuzzSASLParsers(f *testing.F) {
	for _, s := range []string{"n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA", "a\x00b\x00c", "n,a=x=2C,n=y,r=z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if cf, err := parseClientFirst(s); err == nil && (cf.user == "" || cf.nonce == "" || !strings.HasSuffix(s, cf.bare)) {
			t.Fatalf("client-first %q parsed to %+v", s, cf)
		}
		if cf, err := parseClientFinal(s); err == nil && (len(cf.proof) == 0 || !strings.HasPrefix(s, cf.withoutProof)) {
			t.Fatalf("client-final %q parsed to %+v", s, cf)
		}
		parsePlain([]byte(s))
		decodeSaslName(s)
	})
}
