package netfetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// ClientSecurity is the replica fetchers' security toward the inter-broker listener
// (security.inter.broker.protocol or inter.broker.listener.name): TLS with the brokers'
// truststore, and SASL with sasl.mechanism.inter.broker.protocol and the broker's own
// credentials, through franz-go's client mechanisms. The zero value is PLAINTEXT.
type ClientSecurity struct {
	TLS  *tls.Config    // nil: no TLS
	SASL sasl.Mechanism // nil: no SASL
}

// SetSecurity sets the security of the connections Dial opens from now on. Not safe to
// call concurrently with Dial: call it before the broker starts.
func (t *Transport) SetSecurity(s ClientSecurity) { t.sec = s }

// secureReplicaConn runs the client side of the inter-broker listener's TLS handshake and
// SASL exchange on a new replica fetch connection (ctx bounds both).
func (t *Transport) secureReplicaConn(ctx context.Context, fc *fetchConn, host string) error {
	if t.sec.TLS == nil && t.sec.SASL == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, replicaDialTimeout+tlsHandshakeTimeout)
	defer cancel()
	if t.sec.TLS != nil {
		cfg := t.sec.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(fc.nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("replica fetcher %d->%d: TLS handshake: %w", t.self, fc.source, err)
		}
		fc.nc = tc
		fc.br = bufio.NewReaderSize(countedReader{tc, fc.costs}, 64<<10) // reads through TLS from now on
		fc.sr, fc.raw = nil, nil
		if fc.x != nil { // io_uring would bypass TLS: the poller's way
			fc.x.Close()
			fc.x = nil
		}
	}
	if t.sec.SASL != nil {
		if err := fc.authenticate(ctx, t.sec.SASL, host); err != nil {
			return err
		}
		// The exchange's context ends with this call: unhook it from the connection
		// before it is canceled (ctx is not done yet, so the stop takes).
		if fc.ctxStop != nil {
			fc.ctxStop()
			fc.ctxStop, fc.ctx = nil, nil
		}
	}
	fc.nc.SetDeadline(time.Time{})
	return nil
}

// authenticate runs SaslHandshake v1 and the SaslAuthenticate exchange of mech.
func (c *fetchConn) authenticate(ctx context.Context, mech sasl.Mechanism, host string) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.roundTrip(ctx, hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("replica fetcher %d->%d: SASL handshake %s (the listener enables %v): %w", c.self, c.source, mech.Name(), hsResp.SupportedMechanisms, err)
	}
	session, out, err := mech.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("replica fetcher %d->%d: SASL %s: %w", c.self, c.source, mech.Name(), err)
	}
	for done := false; !done; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.roundTrip(ctx, req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("replica fetcher %d->%d: SASL %s%s: %w", c.self, c.source, mech.Name(), msg, err)
		}
		if done, out, err = session.Challenge(resp.SASLAuthBytes); err != nil {
			return fmt.Errorf("replica fetcher %d->%d: SASL %s: %w", c.self, c.source, mech.Name(), err)
		}
	}
	return nil
}

// hostOf is the host of a host:port address.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
