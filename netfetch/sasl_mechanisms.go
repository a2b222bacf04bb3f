package netfetch

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/isrbench/isrbench/core/controller"
)

// The server side of the SASL mechanisms a listener enables (sasl.enabled.mechanisms):
// PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), against the SCRAM
// users of the controller (core/controller/users.go). PLAIN checks the password against the
// user's SCRAM credential (any mechanism): one user database for both.
//
// A refusal is errAuthFailed (the client gets SASL_AUTHENTICATION_FAILED with Kafka's
// message and the connection is closed) or a malformed message (the same code, saying so);
// no message names a password or echoes the client's proof.

// errAuthFailed is the refusal of a credential, with Kafka's message.
type authFailed struct{ mechanism string }

func (e *authFailed) Error() string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + e.mechanism
}

// saslMechanism is one authentication exchange on one connection.
type saslMechanism interface {
	// step takes the client's next message and returns the server's answer; done reports
	// that the client is authenticated (user set).
	step(in []byte) (out []byte, done bool, err error)
	user() string
}

// credentials is what the mechanisms look users up in (the controller).
type credentials interface {
	ScramCredentialOf(user, mechanism string) (controller.ScramCredential, bool)
	ScramCredentialsOf(user string) []controller.ScramCredential
}

func newMechanism(name string, creds credentials) saslMechanism {
	switch name {
	case "PLAIN":
		return &plainServer{creds: creds}
	case controller.ScramSHA256, controller.ScramSHA512:
		return &scramServer{mech: name, h: controller.ScramHash(name), creds: creds}
	}
	return nil
}

// plainServer checks "authzid NUL authcid NUL passwd" (RFC 4616) in one step.
type plainServer struct {
	creds credentials
	name  string
}

func (p *plainServer) user() string { return p.name }

func (p *plainServer) step(in []byte) ([]byte, bool, error) {
	authz, authn, pass, err := parsePlain(in)
	if err != nil {
		return nil, false, err
	}
	if authz != "" && authz != authn {
		return nil, false, errors.New("authorization id must match the user name (PLAIN)")
	}
	for _, cred := range p.creds.ScramCredentialsOf(authn) {
		if scramPasswordMatches(cred, pass) {
			p.name = authn
			return nil, true, nil
		}
	}
	return nil, false, &authFailed{mechanism: "PLAIN"}
}

// parsePlain splits a PLAIN message into its three fields; the user name must not be empty.
func parsePlain(in []byte) (authz, authn, pass string, err error) {
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return "", "", "", errors.New("malformed PLAIN message: want authzid NUL user NUL password")
	}
	if len(parts[1]) == 0 || len(parts[2]) == 0 {
		return "", "", "", errors.New("malformed PLAIN message: empty user name or password")
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}

// scramPasswordMatches derives StoredKey from password with cred's salt and iterations and
// compares it with cred's in constant time.
func scramPasswordMatches(cred controller.ScramCredential, password string) bool {
	h := controller.ScramHash(cred.Mechanism)
	if h == nil || cred.Iterations <= 0 {
		return false
	}
	salted, err := pbkdf2.Key(h, password, cred.Salt, int(cred.Iterations), h().Size())
	if err != nil {
		return false
	}
	derived, err := controller.NewScramCredential(cred.Mechanism, cred.Salt, salted, cred.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(derived.StoredKey, cred.StoredKey) == 1
}

// scramServer runs RFC 5802's exchange: client-first, server-first, client-final,
// server-final.
type scramServer struct {
	mech  string
	h     func() hash.Hash
	creds credentials
	stage int // 0: waiting for client-first, 1: for client-final, 2: done
	name  string
	cred  controller.ScramCredential
	// the messages the AuthMessage is made of, the whole nonce and the GS2 header
	clientFirstBare, serverFirst, nonce, gs2 string
}

func (s *scramServer) user() string { return s.name }

func (s *scramServer) step(in []byte) ([]byte, bool, error) {
	switch s.stage {
	case 0:
		cf, err := parseClientFirst(string(in))
		if err != nil {
			return nil, false, err
		}
		cred, ok := s.creds.ScramCredentialOf(cf.user, s.mech)
		if !ok {
			return nil, false, &authFailed{mechanism: s.mech}
		}
		var r [18]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, false, fmt.Errorf("server nonce: %w", err)
		}
		s.name, s.cred, s.clientFirstBare, s.gs2 = cf.user, cred, cf.bare, cf.gs2
		s.nonce = cf.nonce + base64.RawURLEncoding.EncodeToString(r[:])
		s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
		s.stage = 1
		return []byte(s.serverFirst), false, nil
	case 1:
		s.stage = 2
		cf, err := parseClientFinal(string(in))
		if err != nil {
			return nil, false, err
		}
		if cf.channelBinding != base64.StdEncoding.EncodeToString([]byte(s.gs2)) {
			return nil, false, errors.New("malformed SCRAM client-final message: the channel binding is not the client-first's GS2 header")
		}
		// Kafka's ScramSaslServer checks that the nonce ends with the server-first's, not
		// that it equals it: librdkafka sends its own nonce again in front.
		if !strings.HasSuffix(cf.nonce, s.nonce) {
			return nil, false, errors.New("malformed SCRAM client-final message: the nonce does not match")
		}
		auth := s.clientFirstBare + "," + s.serverFirst + "," + cf.withoutProof
		sig := hmacSum(s.h, s.cred.StoredKey, auth)
		if len(cf.proof) != len(sig) {
			return nil, false, &authFailed{mechanism: s.mech}
		}
		clientKey := make([]byte, len(sig))
		subtle.XORBytes(clientKey, cf.proof, sig)
		hh := s.h()
		hh.Write(clientKey)
		if subtle.ConstantTimeCompare(hh.Sum(nil), s.cred.StoredKey) != 1 {
			return nil, false, &authFailed{mechanism: s.mech}
		}
		return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSum(s.h, s.cred.ServerKey, auth))), true, nil
	}
	return nil, false, errors.New("SCRAM exchange already complete")
}

func hmacSum(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// scramClientFirst is a parsed client-first-message.
type scramClientFirst struct {
	user, nonce string
	bare        string // client-first-message-bare (what AuthMessage starts with)
	gs2         string // the GS2 header, which the client-final's c= carries in base64
}

// parseClientFirst reads "gs2-header client-first-message-bare":
// ("n" | "y") "," [ "a=" authzid ] "," "n=" saslname "," "r=" nonce ["," extensions]. Channel
// binding ("p=") is refused; an authzid must equal the user; extensions (Kafka's
// tokenauth=true) are refused, as delegation tokens are not served.
func parseClientFirst(msg string) (scramClientFirst, error) {
	var cf scramClientFirst
	bad := func(why string) (scramClientFirst, error) {
		return scramClientFirst{}, errors.New("malformed SCRAM client-first message: " + why)
	}
	gs2, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return bad("no GS2 header")
	}
	switch gs2 {
	case "n", "y":
	case "":
		return bad("empty GS2 channel-binding flag")
	default:
		if strings.HasPrefix(gs2, "p=") {
			return bad("channel binding is not supported")
		}
		return bad("unknown GS2 channel-binding flag")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return bad("no authzid field")
	}
	if authz != "" && !strings.HasPrefix(authz, "a=") {
		return bad("authzid field without a=")
	}
	fields := strings.Split(bare, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "n=") || !strings.HasPrefix(fields[1], "r=") {
		return bad("want n=user,r=nonce")
	}
	if len(fields) > 2 {
		return bad("extensions (delegation tokens) are not supported")
	}
	user, err := decodeSaslName(fields[0][2:])
	if err != nil {
		return bad(err.Error())
	}
	if authz != "" {
		az, err := decodeSaslName(authz[2:])
		if err != nil || az != user {
			return bad("authzid must match the user name")
		}
	}
	cf.user, cf.nonce, cf.bare, cf.gs2 = user, fields[1][2:], bare, msg[:len(msg)-len(bare)]
	if cf.user == "" || cf.nonce == "" || !printableNonce(cf.nonce) {
		return bad("empty user name, or a nonce that is empty or not printable")
	}
	return cf, nil
}

// decodeSaslName undoes RFC 5802's escaping of ',' (=2C) and '=' (=3D).
func decodeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad = escape in the user name (want =2C or =3D)")
		}
		i += 2
	}
	return b.String(), nil
}

// printableNonce: RFC 5802's printable ASCII without ','.
func printableNonce(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// scramClientFinal is a parsed client-final-message.
type scramClientFinal struct {
	channelBinding, nonce string
	proof                 []byte
	withoutProof          string // client-final-message-without-proof
}

// parseClientFinal reads "c=" base64 "," "r=" nonce ["," extensions] "," "p=" base64.
func parseClientFinal(msg string) (scramClientFinal, error) {
	var cf scramClientFinal
	bad := func(why string) (scramClientFinal, error) {
		return scramClientFinal{}, errors.New("malformed SCRAM client-final message: " + why)
	}
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return bad("no proof")
	}
	cf.withoutProof = msg[:i]
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil || len(proof) == 0 {
		return bad("the proof is not base64")
	}
	fields := strings.Split(cf.withoutProof, ",")
	if len(fields) < 2 || !strings.HasPrefix(fields[0], "c=") || !strings.HasPrefix(fields[1], "r=") {
		return bad("want c=binding,r=nonce,p=proof")
	}
	cf.channelBinding, cf.nonce, cf.proof = fields[0][2:], fields[1][2:], proof
	return cf, nil
}
