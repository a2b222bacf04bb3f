package netfetch

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 42, min: 0, max: 2, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDeleteGroups(req.(*kmsg.DeleteGroupsRequest))
	}})
}

// handleDeleteGroups deletes Empty groups (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when
// unknown): their metadata and committed offsets get tombstones in __consumer_offsets.
func (c *conn) handleDeleteGroups(req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	coord, cerr := c.coordinator()
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		err := cerr
		if err == nil {
			err = coord.Delete(c.ctx, id)
		}
		rg.ErrorCode = errCode(err)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
