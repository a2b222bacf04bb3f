package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

func init() {
	register(api{key: 20, min: 0, max: 6, handle: func(c *conn, _ reqHeader, req kmsg.Request) (kmsg.Response, error) {
		return c.handleDeleteTopics(req.(*kmsg.DeleteTopicsRequest))
	}})
}

// handleDeleteTopics deletes topics by name or, v6+, by topic id (controller.DeleteTopic: the
// brokers remove their replicas), with Kafka's per-topic errors: UNKNOWN_TOPIC_OR_PARTITION
// for an unknown name, UNKNOWN_TOPIC_ID for an id no topic has, INVALID_REQUEST for a topic
// given twice or an entry with both or neither of name and id. Each answer carries the
// topic's name and id (v6). The response waits (up to timeout_ms, at most 10 s) until the
// alive brokers applied the deletions; internal topics may be deleted, as in Kafka. With
// delete.topic.enable=false nothing is deleted: every topic fails with
// TOPIC_DELETION_DISABLED, or INVALID_REQUEST before v3 (Kafka's ControllerApis).
func (c *conn) handleDeleteTopics(req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if !c.s.cfg.Broker.Config().Settings.Bool("delete.topic.enable") {
		err := fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.TopicDeletionDisabled)
		if req.Version < 3 {
			err = fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.InvalidRequest)
		}
		for _, n := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic = kmsg.StringPtr(n)
			rt.ErrorCode, rt.ErrorMessage = errCode(err), errMessage(err)
			resp.Topics = append(resp.Topics, rt)
		}
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			rt.ErrorCode, rt.ErrorMessage = errCode(err), errMessage(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	type entry struct {
		name  *string
		id    [16]byte
		preEr error
	}
	var entries []entry
	for _, n := range req.TopicNames {
		entries = append(entries, entry{name: &n})
	}
	for _, t := range req.Topics {
		e := entry{name: t.Topic, id: t.TopicID}
		switch {
		case t.Topic != nil && t.TopicID != [16]byte{}:
			e.preEr = fmt.Errorf("you may not specify both topic name and topic id: %w", kerr.InvalidRequest)
		case t.Topic == nil && t.TopicID == [16]byte{}:
			e.preEr = fmt.Errorf("neither topic name nor id were specified: %w", kerr.InvalidRequest)
		case t.Topic == nil:
			if name, ok := c.s.cfg.Controller.TopicName(t.TopicID); ok {
				e.name = &name
			} else {
				e.preEr = fmt.Errorf("topic id %v: no topic has it: %w", controller.TopicID(t.TopicID), kerr.UnknownTopicID)
			}
		}
		entries = append(entries, e)
	}
	count := map[string]int{}
	for _, e := range entries {
		if e.name != nil && e.preEr == nil {
			count[*e.name]++
		}
	}
	deleted := false
	for _, e := range entries {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = e.name, e.id
		err := e.preEr
		switch {
		case err != nil:
		case count[*e.name] > 1:
			err = fmt.Errorf("duplicate topic name %q: %w", *e.name, kerr.InvalidRequest)
		default:
			if id, ok := c.s.cfg.Controller.TopicID(*e.name); ok {
				rt.TopicID = id
			}
			if err = c.s.cfg.Controller.DeleteTopic(*e.name); err == nil {
				deleted = true
			}
		}
		rt.ErrorCode, rt.ErrorMessage = errCode(err), errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	if deleted {
		c.awaitBrokers(req.TimeoutMillis)
	}
	return resp, nil
}
