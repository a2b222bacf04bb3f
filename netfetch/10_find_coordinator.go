package netfetch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/txn"
)

func init() {
	// v4 batches keys (KIP-699); v5 adds TRANSACTION_ABORTABLE, v6 share groups.
	register(api{key: 10, min: 0, max: 4, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleFindCoordinator(req.(*kmsg.FindCoordinatorRequest))
	}})
}

// handleFindCoordinator answers FindCoordinator: for a group (key type 0), the leader of its
// __consumer_offsets partition; for a transactional id (key type 1), the leader of its
// __transaction_state partition (each topic is created on first use;
// COORDINATOR_NOT_AVAILABLE until the partition has a leader).
func (c *conn) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		var err error
		switch req.CoordinatorType {
		case 0:
			err = c.locateGroup(key, &rc)
		case 1:
			err = c.locateTxn(key, &rc)
		default:
			err = fmt.Errorf("coordinator key type %d is not supported (0 = group, 1 = transaction): %w", req.CoordinatorType, kerr.InvalidRequest)
		}
		if err != nil {
			rc.NodeID, rc.Host, rc.Port = -1, "", -1
			rc.ErrorCode, rc.ErrorMessage = errCode(err), reason(err)
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	if req.Version < 4 {
		rc := resp.Coordinators[0]
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = rc.ErrorCode, rc.NodeID, rc.Host, rc.Port
		if req.Version >= 1 {
			resp.ErrorMessage = rc.ErrorMessage
		}
		resp.Coordinators = nil
	}
	return resp, nil
}

func (c *conn) locateTxn(key string, rc *kmsg.FindCoordinatorResponseCoordinator) error {
	if key == "" {
		return fmt.Errorf("transactional id is empty: %w", kerr.InvalidRequest)
	}
	ctrl := c.s.cfg.Controller
	if ctrl == nil || c.s.txns == nil {
		return kerr.CoordinatorNotAvailable
	}
	id, err := txn.Locate(ctrl, c.s.txns.Config(), key)
	if err != nil {
		return err
	}
	return c.coordinatorAddr(id, rc)
}

func (c *conn) coordinatorAddr(id int32, rc *kmsg.FindCoordinatorResponseCoordinator) error {
	b, ok := c.s.cfg.Controller.Broker(id)
	if !ok || !b.Alive {
		return fmt.Errorf("coordinator broker %d is not alive: %w", id, kerr.CoordinatorNotAvailable)
	}
	rc.NodeID = b.ID
	rc.Host, rc.Port = c.advertised(b.ID, b.Host, b.Port)
	return nil
}

func (c *conn) locateGroup(key string, rc *kmsg.FindCoordinatorResponseCoordinator) error {
	if key == "" {
		return fmt.Errorf("group id is empty: %w", kerr.InvalidGroupID)
	}
	ctrl := c.s.cfg.Controller
	if ctrl == nil {
		return kerr.CoordinatorNotAvailable
	}
	id, err := group.Locate(ctrl, c.s.groupConfig(), key)
	if err != nil {
		return err
	}
	b, ok := ctrl.Broker(id)
	if !ok || !b.Alive {
		return fmt.Errorf("coordinator broker %d is not alive: %w", id, kerr.CoordinatorNotAvailable)
	}
	rc.NodeID, rc.Host, rc.Port = b.ID, b.Host, b.Port
	rc.Host, rc.Port = c.advertised(b.ID, b.Host, b.Port)
	return nil
}

// reason is err's text without the trailing Kafka error (the code already says it).
func reason(err error) *string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		msg = strings.TrimSuffix(msg, ": "+ke.Error())
	}
	return &msg
}
