package clientprops

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckTimeout bounds Check when its context has no earlier deadline.
const CheckTimeout = 15 * time.Second

// CheckError is Check's error: the client could not connect with its security settings. Its
// message names the address, the client's security (no secret) and the cause; Unwrap gives
// the underlying error (a kerr code such as kerr.SaslAuthenticationFailed, an x509 error).
type CheckError struct {
	Addr   string // the broker the cause was seen on
	Client string // Config.String
	Cause  string // what went wrong and what to change, secrets scrubbed
	Err    error
	// Unreachable: nothing answered (connection refused, no route, no answer in time), as
	// opposed to a refusal of the client's security.
	Unreachable bool
	// Code is the Kafka error the cause amounts to when the broker did not send it itself
	// (kerr.SaslAuthenticationFailed for a connection closed on the credentials), or nil.
	Code error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("connecting to %s as %s: %s", e.Addr, e.Client, e.Cause)
}

// Unwrap gives Err and Code: errors.Is(err, kerr.SaslAuthenticationFailed) holds whether the
// broker answered the code or closed the connection on the credentials.
func (e *CheckError) Unwrap() []error {
	if e.Code == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Code}
}

// Check connects to the seeds with c's options and asks for the cluster's metadata once (no
// retries), within CheckTimeout: a refusal comes back now, as a *CheckError naming its cause,
// rather than as a run that hangs. extra are further kgo options (a logger, a dialer).
func Check(ctx context.Context, seeds []string, c *Config, extra ...kgo.Opt) error {
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, CheckTimeout)
		defer cancel()
	}
	w := &lastWrite{}
	w.key.Store(-1)
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithHooks(w)}, opts...), extra...)...)
	if err != nil {
		return fmt.Errorf("client for %s: %s", strings.Join(seeds, ","), c.scrub(err.Error()))
	}
	err = cl.Ping(ctx)
	cl.Close()
	if err == nil {
		return nil
	}
	addr := seeds[len(seeds)-1] // Ping tries the seeds in order and returns the last error
	cause := diagnose(context.WithoutCancel(ctx), addr, c, err, int16(w.key.Load()))
	ce := &CheckError{Addr: addr, Client: c.String(), Cause: c.scrub(cause), Err: err}
	ce.Unreachable = strings.HasPrefix(cause, unreachableConnRefused) || strings.HasPrefix(cause, unreachableNoAnswer) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
	if strings.HasPrefix(cause, "SASL_AUTHENTICATION_FAILED") && !errors.Is(err, kerr.SaslAuthenticationFailed) {
		ce.Code = kerr.SaslAuthenticationFailed
	}
	return ce
}

// lastWrite records the key of the last request the client wrote (kgo.HookBrokerWrite).
type lastWrite struct{ key atomic.Int32 }

func (w *lastWrite) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	w.key.Store(int32(key))
}

// The request keys of the SASL exchange.
const (
	keySASLHandshake    = 17
	keySASLAuthenticate = 36
)

const (
	unreachableConnRefused = "connection refused"
	unreachableNoAnswer    = "no answer in time"
)

// diagnose explains err, the failure of the first request on a new connection to addr;
// lastKey is the last request written on it (-1: none).
func diagnose(ctx context.Context, addr string, c *Config, err error, lastKey int16) string {
	msg := err.Error()
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var ae tls.AlertError
	var eof *kgo.ErrFirstReadEOF
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		said := strings.TrimPrefix(strings.TrimPrefix(msg, kerr.SaslAuthenticationFailed.Error()), ": ")
		return fmt.Sprintf("SASL_AUTHENTICATION_FAILED: the cluster refused user %s with %s (wrong user or password, or no such %s user); the broker said: %s", c.User, c.Mechanism, c.Mechanism, said)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Sprintf("UNSUPPORTED_SASL_MECHANISM: the listener does not enable %s (its sasl.enabled.mechanisms): %s", c.Mechanism, msg)
	case errors.Is(err, kerr.IllegalSaslState):
		return "ILLEGAL_SASL_STATE: the broker did not expect this SASL exchange: " + msg
	case errors.As(err, &ua):
		return fmt.Sprintf("TLS: the broker's certificate is not trusted: x509: certificate signed by unknown authority (%s); set ssl.truststore.location (or ssl.ca.location) to the PEM of the CA that signed it", certName(ua.Cert))
	case errors.As(err, &he):
		return fmt.Sprintf("TLS: the broker's certificate does not name this host: %v; connect by a name it holds, or set ssl.endpoint.identification.algorithm= (empty) to skip the host name check", he)
	case errors.As(err, &ci):
		return fmt.Sprintf("TLS: the broker's certificate is not valid: %v", ci)
	case errors.As(err, &ve):
		return fmt.Sprintf("TLS: the broker's certificate is not trusted: %v", ve.Err)
	case errors.As(err, &ae) || strings.Contains(msg, "remote error: tls:"):
		if strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate authority") {
			return "TLS: the broker refused the client certificate (its ssl.client.auth requires one it trusts; set ssl.keystore.location or ssl.certificate.location and ssl.key.location): " + msg
		}
		return "TLS: the broker ended the handshake: " + msg
	case errors.Is(err, syscall.ECONNREFUSED):
		return unreachableConnRefused + ": nothing listens there (" + msg + ")"
	case c.Protocol.TLS() && errors.Is(err, context.DeadlineExceeded) && speaksPlainKafka(ctx, addr):
		return fmt.Sprintf("the server answered without TLS: this listener is PLAINTEXT or SASL_PLAINTEXT, the client is %s; set security.protocol accordingly", c.Protocol)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return unreachableNoAnswer + " (" + msg + ")"
	case c.Protocol.SASL() && lastKey == keySASLAuthenticate && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Sprintf("SASL_AUTHENTICATION_FAILED: the broker closed the connection on user %s's %s credentials (wrong user or password, or no such %s user)", c.User, c.Mechanism, c.Mechanism)
	case c.Protocol.SASL() && lastKey == keySASLHandshake && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Sprintf("the broker closed the connection on the SASL handshake for %s (is SASL enabled on this listener?)", c.Mechanism)
	}
	mismatch := strings.Contains(msg, "tls alert record") || errors.As(err, &eof) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || strings.Contains(msg, "first record does not look like a TLS handshake")
	if !mismatch {
		return msg
	}
	if !c.Protocol.TLS() && speaksTLS(ctx, addr) {
		return fmt.Sprintf("the server answered with TLS: this listener is SSL or SASL_SSL, the client is %s; set security.protocol=SSL (or SASL_SSL) and ssl.truststore.location", c.Protocol)
	}
	if lastKey >= 0 || !c.Protocol.TLS() { // the connection was up (TLS included): a request was written
		if !c.Protocol.SASL() {
			return "the broker closed the connection after the first request: the listener probably requires SASL (security.protocol=SASL_PLAINTEXT or SASL_SSL, with sasl.mechanism and credentials) (" + msg + ")"
		}
		return "the broker closed the connection: " + msg
	}
	if speaksPlainKafka(ctx, addr) {
		return fmt.Sprintf("the server answered without TLS: this listener is PLAINTEXT or SASL_PLAINTEXT, the client is %s; set security.protocol accordingly", c.Protocol)
	}
	return "the TLS handshake failed: " + msg
}

func certName(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	return fmt.Sprintf("subject %q, issuer %q", c.Subject.String(), c.Issuer.String())
}

// speaksTLS reports whether addr completes a TLS handshake (any certificate accepted: this
// only asks which protocol the port speaks).
func speaksTLS(ctx context.Context, addr string) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // protocol sniffing only
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		// A server that asks for a client certificate still speaks TLS.
		var ae tls.AlertError
		return errors.As(err, &ae) || strings.Contains(err.Error(), "remote error: tls")
	}
	conn.Close()
	return true
}

// speaksPlainKafka reports whether addr answers a plaintext ApiVersions v0 request.
func speaksPlainKafka(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	// size, api key 18, version 0, correlation id 7, client id "" (length 0)
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0, 0}
	if _, err := conn.Write(req); err != nil {
		return false
	}
	var hdr [8]byte
	if _, err := io.ReadFull(bufio.NewReader(conn), hdr[:]); err != nil {
		return false
	}
	return binary.BigEndian.Uint32(hdr[4:]) == 7
}
