package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 50, min: 0, max: 0, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeUserSCRAMCredentials(req.(*kmsg.DescribeUserSCRAMCredentialsRequest))
	}})
}

// scramMechanismCodes are the wire codes of the SCRAM mechanisms (Kafka's ScramMechanism).
var scramMechanismCodes = map[string]int8{controller.ScramSHA256: 1, controller.ScramSHA512: 2}

// scramMechanismName is the name of a wire code, "" for UNKNOWN.
func scramMechanismName(code int8) string {
	for name, c := range scramMechanismCodes {
		if c == code {
			return name
		}
	}
	return ""
}

// handleDescribeUserSCRAMCredentials lists the users' SCRAM mechanisms and iteration
// counts (never a salt or key): every user when the request names none.
func (c *conn) handleDescribeUserSCRAMCredentials(req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	ctrl := c.s.cfg.Controller
	if ctrl == nil {
		return nil, closef("DescribeUserScramCredentials on a server without a controller")
	}
	var names []string
	for _, u := range req.Users {
		names = append(names, u.Name)
	}
	for _, d := range ctrl.DescribeScramUsers(names) {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = d.User, errCode(d.Err)
		if d.Err != nil {
			r.ErrorMessage = reason(d.Err)
		}
		for _, cr := range d.Credentials {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismCodes[cr.Mechanism], cr.Iterations
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
