package netfetch

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 16, min: 0, max: 5, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleListGroups(req.(*kmsg.ListGroupsRequest))
	}})
}

// handleListGroups lists the groups this broker coordinates (clients ask every broker),
// filtered by state (v4+, Kafka's state names, case-insensitive) and type (v5+: every group
// is "classic"). While a partition is still loading the answer carries
// COORDINATOR_LOAD_IN_PROGRESS with the groups loaded so far.
func (c *conn) handleListGroups(req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	coord, err := c.coordinator()
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	groups, loading := coord.List()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "classic") }) {
		return resp, nil
	}
	for _, g := range groups {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, g.State.String()) }) {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = g.Group, g.ProtocolType, g.State.String(), "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
