package netfetch

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 60, min: 0, max: 2, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDescribeCluster(req.(*kmsg.DescribeClusterRequest))
	}})
}

// clusterOperations is the authorized-operations bit field of the CLUSTER resource with no
// authorizer: every operation Kafka defines on it (ALTER 4, CREATE 7, DESCRIBE 8,
// CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12,
// CREATE_TOKENS 13, DESCRIBE_TOKENS 14).
const clusterOperations = 1<<4 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12 | 1<<13 | 1<<14

// handleDescribeCluster answers as a Kafka broker (endpoint type BROKER): the cluster id and
// the alive brokers (with include_fenced_brokers, v2, the fenced ones too, flagged), and as
// controller id the lowest alive broker id, as Metadata reports it (isrbench's controller
// is no broker; KRaft brokers report a random alive broker). An endpoint type other than
// BROKER is MISMATCHED_ENDPOINT_TYPE (CONTROLLER) or UNSUPPORTED_ENDPOINT_TYPE.
func (c *conn) handleDescribeCluster(req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterID = ClusterID
	resp.ControllerID = -1
	resp.ClusterAuthorizedOperations = math.MinInt32
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		var err error
		if req.EndpointType == 2 {
			err = fmt.Errorf("the request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER: %w", kerr.MismatchedEndpointType)
		} else {
			err = fmt.Errorf("unsupported endpoint type %d (1 BROKER, 2 CONTROLLER): %w", req.EndpointType, kerr.UnsupportedEndpointType)
		}
		resp.ErrorCode, resp.ErrorMessage = errCode(err), errMessage(err)
		return resp, nil
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
	}
	for _, b := range c.s.cfg.Controller.Brokers() {
		if !b.Alive && !req.IncludeFencedBrokers {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.IsFenced = b.ID, b.Host, b.Port, !b.Alive
		rb.Host, rb.Port = c.advertised(b.ID, b.Host, b.Port)
		resp.Brokers = append(resp.Brokers, rb)
		if b.Alive && (resp.ControllerID == -1 || b.ID < resp.ControllerID) {
			resp.ControllerID = b.ID
		}
	}
	return resp, nil
}
