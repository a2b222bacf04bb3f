package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 51, min: 0, max: 0, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleAlterUserSCRAMCredentials(req.(*kmsg.AlterUserSCRAMCredentialsRequest))
	}})
}

// handleAlterUserSCRAMCredentials sets and deletes SCRAM credentials in the metadata log
// (controller.AlterScramUsers: Kafka's checks, a user's changes all or none); one result
// per user. A metadata log that cannot be written fails every user (KAFKA_STORAGE_ERROR).
func (c *conn) handleAlterUserSCRAMCredentials(req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	ctrl := c.s.cfg.Controller
	if ctrl == nil {
		return nil, closef("AlterUserScramCredentials on a server without a controller")
	}
	var dels []controller.ScramDeletion
	var ups []controller.ScramUpsertion
	for _, d := range req.Deletions {
		dels = append(dels, controller.ScramDeletion{User: d.Name, Mechanism: scramMechanismName(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		ups = append(ups, controller.ScramUpsertion{User: u.Name, Mechanism: scramMechanismName(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	results, order, err := ctrl.AlterScramUsers(dels, ups)
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		uerr := results[user]
		if err != nil {
			uerr = err
		}
		r.ErrorCode = errCode(uerr)
		if uerr != nil {
			r.ErrorMessage = reason(uerr)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
