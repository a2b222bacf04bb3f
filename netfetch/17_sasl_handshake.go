package netfetch

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 17, min: 0, max: 1, handle: func(c *conn, h reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleSASLHandshake(h, req.(*kmsg.SASLHandshakeRequest))
	}})
}

// handleSASLHandshake starts a SASL exchange with the client's mechanism. It answers the
// listener's sasl.enabled.mechanisms; UNSUPPORTED_SASL_MECHANISM for another (the client may
// ask again); ILLEGAL_SASL_STATE on a listener without SASL, after authentication or during
// an exchange. v1 carries the tokens in SaslAuthenticate requests; after v0 they come as
// bare frames (answerRawToken).
func (c *conn) handleSASLHandshake(h reqHeader, req *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	sec := c.security()
	resp.SupportedMechanisms = slices.Clone(sec.Mechanisms)
	switch {
	case !sec.IsSASL() || c.sasl.done || c.sasl.mech != nil || c.s.cfg.Controller == nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !slices.Contains(sec.Mechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		c.sasl.mech = newMechanism(req.Mechanism, c.s.cfg.Controller)
		c.sasl.raw = h.version == 0
	}
	return resp, nil
}
