package kafkatool

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Entity is what `isrbench configs` changes or describes: a topic, one broker or the
// cluster-wide broker default.
type Entity struct {
	Topic    string // a topic's configs when not ""
	Default  bool   // else the cluster-wide broker default when set
	BrokerID int32  // else this broker's
	Name     string // --entity-name as given (the broker id's text)
}

// String names the entity as Kafka's tools do: "topic T", "broker 1", "the cluster-wide
// broker default".
func (e Entity) String() string {
	switch {
	case e.Topic != "":
		return "topic " + e.Topic
	case e.Default:
		return "the cluster-wide broker default"
	}
	return "broker " + e.Name
}

// AlterConfigs applies the incremental operations ops to the entity's configs and says so on w.
func AlterConfigs(ctx context.Context, adm *kadm.Client, e Entity, ops []kadm.AlterConfig, w io.Writer) error {
	var rs kadm.AlterConfigsResponses
	var err error
	switch {
	case e.Topic != "":
		rs, err = adm.AlterTopicConfigs(ctx, ops, e.Topic)
	case e.Default:
		rs, err = adm.AlterBrokerConfigs(ctx, ops)
	default:
		rs, err = adm.AlterBrokerConfigs(ctx, ops, e.BrokerID)
	}
	if err := alterErr(rs, err); err != nil {
		return fmt.Errorf("configs: alter %s: %w", e, err)
	}
	fmt.Fprintf(w, "Completed updating config for %s.\n", e)
	return nil
}

// DescribeConfigs prints the entity's dynamic configs (all: every config), each with its
// sensitivity and synonyms, as kafka-configs.sh --describe does.
func DescribeConfigs(ctx context.Context, adm *kadm.Client, e Entity, all bool, w io.Writer) error {
	var rcs kadm.ResourceConfigs
	var err error
	switch {
	case e.Topic != "":
		rcs, err = adm.DescribeTopicConfigs(ctx, e.Topic)
	case e.Default:
		rcs, err = adm.DescribeBrokerConfigs(ctx)
	default:
		rcs, err = adm.DescribeBrokerConfigs(ctx, e.BrokerID)
	}
	if err != nil {
		return fmt.Errorf("configs: describe %s: %w", e, err)
	}
	if len(rcs) != 1 {
		return fmt.Errorf("configs: describe %s: %d resources answered, want 1", e, len(rcs))
	}
	rc := rcs[0]
	if rc.Err != nil {
		return fmt.Errorf("configs: describe %s: %w%s", e, rc.Err, errDetail(rc.ErrMessage))
	}
	kind := "Dynamic configs"
	if all {
		kind = "All configs"
	}
	fmt.Fprintf(w, "%s for %s are:\n", kind, e)
	for _, c := range rc.Configs {
		dynamic := c.Source == kmsg.ConfigSourceDynamicTopicConfig || c.Source == kmsg.ConfigSourceDynamicBrokerConfig || c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
		if !all && !dynamic {
			continue
		}
		var syns []string
		for _, s := range c.Synonyms {
			v := "null"
			if s.Value != nil {
				v = *s.Value
			}
			syns = append(syns, s.Source.String()+":"+s.Key+"="+v)
		}
		v := "null"
		if c.Value != nil {
			v = *c.Value
		}
		fmt.Fprintf(w, "  %s=%s sensitive=%v synonyms={%s}\n", c.Key, v, c.Sensitive, strings.Join(syns, ", "))
	}
	return nil
}

// SplitConfigs splits kafka-configs' --add-config / --delete-config text at the commas
// outside brackets ("k=v,k2=[a,b]" is two configs), dropping empty parts.
func SplitConfigs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				if part := strings.TrimSpace(s[start:i]); part != "" {
					out = append(out, part)
				}
				start = i + 1
			}
		}
	}
	if part := strings.TrimSpace(s[start:]); part != "" {
		out = append(out, part)
	}
	return out
}
