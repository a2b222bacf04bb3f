package target

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/internal/clientprops"
	"github.com/isrbench/isrbench/workloads/spec"
)

// A kafka:// target's client security: the spec's target block holds Kafka client properties
// (security.protocol, sasl.*, ssl.*), as --command-config gives them from a .properties file
// (MergeClientProps). Every client of a run (producers, consumers, the admin client, the HW
// observer, the read-back) connects with them. In the recorded config they are target.<key>,
// secrets as [hidden].
//
//	target:
//	  bootstrap.servers: b-1.example:9096,b-2.example:9096
//	  security.protocol: SASL_SSL
//	  sasl.mechanism: SCRAM-SHA-512
//	  sasl.jaas.config: org.apache.kafka.common.security.scram.ScramLoginModule required username="bench" password="...";
//	  ssl.truststore.location: /etc/kafka/ca.pem

// ErrTargetConnect is wrapped by the error of a run or sweep whose kafka:// target refused
// the client's security (wrong credentials, an untrusted certificate, TLS against plaintext)
// or whose security settings could not be used (a missing certificate file): bad input, found
// before the load starts.
var ErrTargetConnect = errors.New("the target refused the client's security settings")

type connectError struct{ err error }

func (e *connectError) Error() string   { return e.err.Error() }
func (e *connectError) Unwrap() []error { return []error{e.err, ErrTargetConnect} }

// ClientSecurity builds the target's client options and checks, with one connection, that
// the target accepts them. A security refusal (or unusable settings) wraps ErrTargetConnect;
// an unreachable target is an ordinary error (a cluster may be restarting), returned with the
// options.
func ClientSecurity(ctx context.Context, name string, hosts []string, s *spec.Spec) ([]kgo.Opt, error) {
	c, err := s.ClientConfig()
	if err != nil {
		return nil, &connectError{err}
	}
	opts, err := c.Opts()
	if err != nil {
		return nil, &connectError{fmt.Errorf("target %s: %w", name, err)}
	}
	if err := clientprops.Check(ctx, hosts, c); err != nil {
		var ce *clientprops.CheckError
		if errors.As(err, &ce) && ce.Unreachable {
			return opts, fmt.Errorf("target %s: %w", name, err)
		}
		return nil, &connectError{fmt.Errorf("target %s: %w", name, err)}
	}
	return opts, nil
}

// ClientOpts are the options every client of a run starts from: the seeds and the target's
// security.
func ClientOpts(seeds []string, sec []kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...)
}

// securedTarget is a Target whose clients need security options (a kafka:// target with a
// target block).
type securedTarget interface{ clientSecurity() []kgo.Opt }

// TargetSecurity returns t's client security options, nil for a plaintext target.
func TargetSecurity(t Target) []kgo.Opt {
	if st, ok := t.(securedTarget); ok {
		return st.clientSecurity()
	}
	return nil
}
