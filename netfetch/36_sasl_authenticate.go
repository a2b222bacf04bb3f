package netfetch

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 36, min: 0, max: 2, serve: func(c *conn, h reqHeader, req kmsg.Request) error {
		return c.handleSASLAuthenticate(h, req.(*kmsg.SASLAuthenticateRequest))
	}})
}

// handleSASLAuthenticate runs one step of the exchange the SaslHandshake (v1) started. A
// refused credential or a malformed message is answered with SASL_AUTHENTICATION_FAILED and
// Kafka's message, then the connection is closed, as Kafka does; so is an authenticate
// without a handshake (ILLEGAL_SASL_STATE). Sessions do not expire (SessionLifetimeMillis 0:
// no re-authentication, as Kafka's default connections.max.reauth.ms=0).
func (c *conn) handleSASLAuthenticate(h reqHeader, req *kmsg.SASLAuthenticateRequest) error {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SetVersion(h.version)
	if !c.security().IsSASL() || c.sasl.done || c.sasl.mech == nil || c.sasl.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 first"
		resp.ErrorMessage = &msg
		c.markSend()
		if err := c.writeResponse(h, resp); err != nil {
			return err
		}
		return closef("%s from %s", msg, c.nc.RemoteAddr())
	}
	out, done, err := c.sasl.mech.step(req.SASLAuthBytes)
	if err != nil {
		c.sasl.mech = nil
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		c.markSend()
		if werr := c.writeResponse(h, resp); werr != nil {
			return werr
		}
		return closef("failed authentication with %s (%s)", c.nc.RemoteAddr(), msg)
	}
	if done {
		c.sasl.done, c.sasl.principal = true, c.sasl.mech.user()
		c.sasl.mech = nil
	}
	resp.SASLAuthBytes = out
	c.markSend()
	if !c.s.waitUnpaused() {
		return net.ErrClosed
	}
	return c.writeResponse(h, resp)
}
