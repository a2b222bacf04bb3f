package netfetch

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Listener security, by Kafka's names: a listener's security.protocol (PLAINTEXT, SSL,
// SASL_PLAINTEXT, SASL_SSL), its TLS material (ssl.keystore as PEM, ssl.client.auth) and
// its sasl.enabled.mechanisms. A TLS listener completes the handshake on the connection's
// own goroutine before reading a request; a client that sends a Kafka request instead gets
// a TLS alert record (what Kafka's SSL listener answers, which clients report as "the
// server answered with TLS") and the connection is closed. A SASL listener serves only
// ApiVersions, SaslHandshake and SaslAuthenticate before the client is authenticated, and
// closes a connection that sends anything else, as Kafka does. Under TLS, Fetch responses
// are written through user space (pread, then the TLS record layer): sendfile cannot send
// through TLS, so those bytes count as TLSCopyBytes and none as SendfileBytes.

// The security protocols.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Security is one listener's security. The zero value is PLAINTEXT.
type Security struct {
	// Protocol is the listener's security protocol ("" = PLAINTEXT).
	Protocol string
	// TLS is the server's TLS configuration (certificate chain and key; ClientAuth and
	// ClientCAs for ssl.client.auth), required for SSL and SASL_SSL.
	TLS *tls.Config
	// Mechanisms is sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SASL_*).
	Mechanisms []string
}

// IsTLS reports whether the listener runs TLS.
func (s Security) IsTLS() bool {
	return s.Protocol == ProtocolSSL || s.Protocol == ProtocolSASLSSL
}

// IsSASL reports whether the listener authenticates with SASL.
func (s Security) IsSASL() bool {
	return s.Protocol == ProtocolSASLPlaintext || s.Protocol == ProtocolSASLSSL
}

// Check reports a listener whose security is incomplete: an unknown protocol, TLS without
// a certificate, SASL without a supported mechanism.
func (s Security) Check() error {
	switch s.Protocol {
	case "", ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
	default:
		return fmt.Errorf("security protocol %q; allowed PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", s.Protocol)
	}
	if s.IsTLS() && (s.TLS == nil || len(s.TLS.Certificates) == 0 && s.TLS.GetCertificate == nil) {
		return fmt.Errorf("%s listener without a certificate (ssl.keystore.location)", s.Protocol)
	}
	if s.IsSASL() {
		if len(s.Mechanisms) == 0 {
			return fmt.Errorf("%s listener without sasl.enabled.mechanisms", s.Protocol)
		}
		for _, m := range s.Mechanisms {
			if !slices.Contains(SASLMechanisms, m) {
				return fmt.Errorf("sasl.enabled.mechanisms: %q; allowed %s", m, strings.Join(SASLMechanisms, ", "))
			}
		}
	}
	return nil
}

// SASLMechanisms are the mechanisms a listener may enable.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Listener is one more listener of a broker (Kafka's listeners beyond the one the brokers
// register with the controller, which is the ServerConfig's own): the server accepts on Ln
// with Security, and answers Metadata, FindCoordinator and DescribeCluster on it with
// Advertise's addresses.
type Listener struct {
	Name     string
	Ln       net.Listener
	Security Security
	// Advertise returns broker id's host and port on this listener (ok false: unknown,
	// the registered address is given).
	Advertise func(id int32) (host string, port int32, ok bool)
}

// listener is a listener as a connection sees it.
type listener struct {
	name      string
	sec       Security
	advertise func(id int32) (string, int32, bool)
}

// advertised is the address of broker id for a client of this connection's listener.
func (c *conn) advertised(id int32, host string, port int32) (string, int32) {
	if c.lis != nil && c.lis.advertise != nil {
		if h, p, ok := c.lis.advertise(id); ok {
			return h, p
		}
	}
	return host, port
}

// security is the connection's listener's security.
func (c *conn) security() Security {
	if c.lis == nil {
		return Security{}
	}
	return c.lis.sec
}

// tlsHandshakeTimeout bounds a TLS handshake (Kafka has no separate bound; a client that
// stalls in the handshake must not hold a connection forever).
const tlsHandshakeTimeout = 10 * time.Second

// tlsAlertUnexpected is a fatal TLS 1.2 alert record, unexpected_message: what a TLS listener
// answers a client that speaks plaintext Kafka to it.
var tlsAlertUnexpected = []byte{21, 3, 3, 0, 2, 2, 10}

// startTLS runs the server side of the TLS handshake and makes the connection read and write
// through TLS. A first byte that is not a TLS handshake record gets a TLS alert.
func (c *conn) startTLS() error {
	deadline := time.Now().Add(tlsHandshakeTimeout)
	if rt := c.s.cfg.Limits.RequestReadTimeout; rt > 0 && rt < tlsHandshakeTimeout {
		deadline = time.Now().Add(rt)
	}
	c.nc.SetDeadline(deadline)
	first, err := c.br.Peek(1)
	if err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	if first[0] != 22 { // not a TLS handshake record: a plaintext client
		c.nc.Write(tlsAlertUnexpected)
		return closef("TLS handshake: the client sent a non-TLS first byte 0x%02x (a plaintext client on a %s listener); answered with a TLS alert", first[0], c.security().Protocol)
	}
	tc := tls.Server(&bufferedConn{Conn: c.nc, r: c.br}, c.security().TLS)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.nc.SetDeadline(time.Time{})
	c.tls = tc
	c.nc = tc
	c.rdl = time.Time{}
	c.br = bufio.NewReaderSize(countedReader{tc, &c.s.stats.cost}, readBufferSize)
	c.sr = nil // br reads through TLS now
	return nil
}

// bufferedConn reads what a bufio.Reader already holds before the connection.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// saslState is a connection's SASL authentication (SASL listeners only).
type saslState struct {
	done bool          // authenticated
	mech saslMechanism // the exchange under way after SaslHandshake
	// raw: the handshake was v0, so the tokens come as bare size-prefixed frames, not
	// SaslAuthenticate requests.
	raw       bool
	principal string
}

// errBeforeAuth is the reason a SASL listener closes a connection that sent another
// request before authenticating.
var errBeforeAuth = errors.New("request before SASL authentication")

// authorize refuses, on a SASL listener, every request but ApiVersions, SaslHandshake and
// SaslAuthenticate until the client is authenticated (Kafka closes the connection).
func (c *conn) authorize(key int16) error {
	if !c.security().IsSASL() || c.sasl.done {
		return nil
	}
	switch key {
	case 17, 18, 36:
		return nil
	}
	return closef("%v: unexpected %s request during SASL authentication from %s", errBeforeAuth, kmsg.NameForKey(key), c.nc.RemoteAddr())
}

// answerRawToken handles a frame after a v0 SaslHandshake: a bare SASL token, answered with
// a bare size-prefixed token; a refusal closes the connection without an answer, as Kafka.
func (c *conn) answerRawToken(body []byte) error {
	out, done, err := c.sasl.mech.step(body)
	if err != nil {
		c.sasl.mech = nil
		return closef("SASL authentication failed for %s: %v", c.nc.RemoteAddr(), err)
	}
	if done {
		c.sasl.done, c.sasl.raw, c.sasl.principal = true, false, c.sasl.mech.user()
		c.sasl.mech = nil
	}
	buf := append(c.out[:0], byte(len(out)>>24), byte(len(out)>>16), byte(len(out)>>8), byte(len(out)))
	buf = append(buf, out...)
	c.out = buf
	c.s.stats.cost.countSocketWrite(len(buf))
	_, err = c.nc.Write(buf)
	return err
}

// secure runs the listener's TLS handshake (if any) before the first request.
func (c *conn) secure() error {
	if c.security().IsTLS() {
		return c.startTLS()
	}
	return nil
}
