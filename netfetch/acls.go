package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the brokers have no authorizer,
// so each answers SECURITY_DISABLED, as a Kafka broker without authorizer.class.name does.

func init() {
	register(api{key: 29, min: 0, max: 3, handle: func(_ *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, noAuthorizer()
		return resp, nil
	}})
	register(api{key: 30, min: 0, max: 3, handle: func(_ *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		r := req.(*kmsg.CreateACLsRequest)
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, noAuthorizer()
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}})
	register(api{key: 31, min: 0, max: 3, handle: func(_ *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		r := req.(*kmsg.DeleteACLsRequest)
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, noAuthorizer()
			resp.Results = append(resp.Results, res)
		}
		return resp, nil
	}})
}

func noAuthorizer() *string {
	s := "No Authorizer is configured on the broker"
	return &s
}
