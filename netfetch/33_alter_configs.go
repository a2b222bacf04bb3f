package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 33, min: 0, max: 2, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleAlterConfigs(req.(*kmsg.AlterConfigsRequest))
	}})
}

// handleAlterConfigs is the legacy AlterConfigs: each resource's configs are replaced by
// exactly the ones given (a topic override or dynamic broker config not named is deleted),
// with the checks of IncrementalAlterConfigs (no null values). validate_only changes
// nothing.
func (c *conn) handleAlterConfigs(req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	rs := make([]alterTarget, len(req.Resources))
	for i := range req.Resources {
		r := &req.Resources[i]
		rs[i] = alterTarget{typ: r.ResourceType, name: r.ResourceName, names: make([]string, len(r.Configs)),
			null: func(j int) bool { return r.Configs[j].Value == nil },
			change: func(ch *controller.ConfigChange) error {
				for j := range r.Configs {
					ch.Set[r.Configs[j].Name] = *r.Configs[j].Value
				}
				return nil
			}}
		for j := range r.Configs {
			rs[i].names[j] = r.Configs[j].Name
		}
	}
	for i, err := range c.alterConfigs(rs, true, req.ValidateOnly) {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = rs[i].typ, rs[i].name
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}
