package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
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
	dups := duplicateResources(req.Resources, func(r *kmsg.AlterConfigsRequestResource) (int8, string) {
		return int8(r.ResourceType), r.ResourceName
	})
	changed := false
	for i := range req.Resources {
		r := &req.Resources[i]
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		err := func() error {
			if dups[resourceKey(int8(r.ResourceType), r.ResourceName)] {
				return fmt.Errorf("each resource must appear at most once: %w", kerr.InvalidRequest)
			}
			names := make([]string, len(r.Configs))
			for j := range r.Configs {
				names[j] = r.Configs[j].Name
			}
			if err := configKeyChecks(names, func(j int) bool { return r.Configs[j].Value == nil }); err != nil {
				return err
			}
			ch := controller.ConfigChange{Set: map[string]string{}, Replace: true, ValidateOnly: req.ValidateOnly}
			for j := range r.Configs {
				ch.Set[r.Configs[j].Name] = *r.Configs[j].Value
			}
			return c.alterResource(r.ResourceType, r.ResourceName, ch, names)
		}()
		if err == nil && !req.ValidateOnly {
			changed = true
		}
		rr.ErrorCode, rr.ErrorMessage = errCode(err), errMessage(err)
		resp.Resources = append(resp.Resources, rr)
	}
	if changed {
		c.awaitBrokers(5000)
	}
	return resp, nil
}
