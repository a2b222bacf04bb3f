package netfetch

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/core/controller"
)

// alterTarget is one resource of an AlterConfigs or IncrementalAlterConfigs request.
type alterTarget struct {
	typ   kmsg.ConfigResourceType
	name  string
	names []string // the config names the request gives, in request order
	// null reports whether config j has a null value its operation does not allow.
	null func(j int) bool
	// change fills the resource's change (Set, Delete) once the request-level checks passed.
	change func(ch *controller.ConfigChange) error
}

// alterConfigs applies each resource atomically, in request order, after Kafka's
// request-level checks (a resource named twice, a config named twice, a null value:
// INVALID_REQUEST), and returns each resource's error. replace makes every change replace the
// resource's configs (the legacy AlterConfigs). Once something changed it waits for the
// brokers to apply it, so that the answer is visible on every broker.
func (c *conn) alterConfigs(rs []alterTarget, replace, validateOnly bool) []error {
	dups := duplicateResources(rs, func(r *alterTarget) (int8, string) { return int8(r.typ), r.name })
	errs := make([]error, len(rs))
	changed := false
	for i := range rs {
		r := &rs[i]
		errs[i] = func() error {
			if dups[resourceKey(int8(r.typ), r.name)] {
				return fmt.Errorf("each resource must appear at most once: %w", kerr.InvalidRequest)
			}
			if err := configKeyChecks(r.names, r.null); err != nil {
				return err
			}
			ch := controller.ConfigChange{Set: map[string]string{}, Replace: replace, ValidateOnly: validateOnly}
			if err := r.change(&ch); err != nil {
				return err
			}
			return c.alterResource(r.typ, r.name, ch, r.names)
		}()
		if errs[i] == nil && !validateOnly {
			changed = true
		}
	}
	if changed {
		c.awaitBrokers(5000)
	}
	return errs
}
