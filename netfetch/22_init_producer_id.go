package netfetch

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: 22, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleInitProducerID(req.(*kmsg.InitProducerIDRequest))
	}})
}

// handleInitProducerID hands out increasing producer ids with epoch 0 so
// that idempotent producers (kgo's default) can produce; the partitions check
// their sequence numbers (core/partition producer state). Ids start at the
// wall clock in µs (newCounters), so they stay unique across restarts.
// Transactional ids are refused.
func (c *conn) handleInitProducerID(req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrInitProducerIDResponse()
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	resp.ProducerID = c.s.stats.producerID.Add(1)
	resp.ProducerEpoch = 0
	return resp, nil
}
