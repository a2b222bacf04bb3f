package workloads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/isrbench/isrbench/internal/clientprops"
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

// targetPrefix is the flat-key prefix of the target block's client properties.
const targetPrefix = "target."

// ErrTargetConnect is wrapped by the error of a run or sweep whose kafka:// target refused
// the client's security (wrong credentials, an untrusted certificate, TLS against plaintext)
// or whose security settings could not be used (a missing certificate file): bad input, found
// before the load starts.
var ErrTargetConnect = errors.New("the target refused the client's security settings")

type connectError struct{ err error }

func (e *connectError) Error() string   { return e.err.Error() }
func (e *connectError) Unwrap() []error { return []error{e.err, ErrTargetConnect} }

// setClientProp sets one property of the target block (key without "target."):
// bootstrap.servers sets the target itself (kafka://host:port,...), a client property read by
// clientprops is kept for the clients, anything else is an error naming the known keys.
func (s *Spec) setClientProp(key, value string) error {
	if key == "bootstrap.servers" {
		v := strings.TrimSpace(value)
		if !strings.HasPrefix(v, "kafka://") {
			v = "kafka://" + v
		}
		if _, err := CheckTarget(v, nil); err != nil {
			return fmt.Errorf("target.bootstrap.servers: %w", err)
		}
		s.Target = v
		return nil
	}
	if !clientprops.Known(key) {
		return fmt.Errorf("unknown key %q: the target block takes bootstrap.servers and the client properties %s", targetPrefix+key, strings.Join(clientprops.KnownKeys(), ", "))
	}
	if s.Client == nil {
		s.Client = map[string]string{}
	}
	s.Client[key] = value
	return nil
}

// MergeClientProps adds the client properties of a --command-config file to the target
// block, a key of the file replacing the spec's. It returns the keys it does not use (not
// about security), for a note.
func (s *Spec) MergeClientProps(p clientprops.Props) (ignored []string) {
	seen := map[string]bool{}
	for _, pr := range p {
		if !clientprops.Known(pr.Key) {
			if !seen[pr.Key] {
				ignored = append(ignored, pr.Key)
			}
			seen[pr.Key] = true
			continue
		}
		if s.Client == nil {
			s.Client = map[string]string{}
		}
		s.Client[pr.Key] = pr.Value
	}
	return ignored
}

// ClientConfig is the client security of the spec's target (PLAINTEXT when the block has
// none).
func (s *Spec) ClientConfig() (*clientprops.Config, error) {
	c, err := clientprops.FromMap(s.Client)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	return c, nil
}

// validateClient checks that the target block's properties make a client Config. Whether
// the target is a kafka:// one is checked when it is known (CheckClientTarget): a spec may
// hold the security and --target the address.
//
// A block of only target.security.protocol and target.sasl.mechanism may be for the
// embedded cluster, which makes the rest: only its values are checked here.
func (s *Spec) validateClient() error {
	if len(s.Client) == 0 {
		return nil
	}
	onlyEmbedded := true
	for k := range s.Client {
		onlyEmbedded = onlyEmbedded && slices.Contains(embeddedClientKeys, k)
	}
	if onlyEmbedded && !strings.HasPrefix(s.Target, "kafka://") {
		if _, err := clientprops.ParseProtocol(targetProtocolParam.get(s).(string)); err != nil {
			return fmt.Errorf("target.%w", err)
		}
		if m, ok := s.Client["sasl.mechanism"]; ok && !slices.Contains(clientprops.Mechanisms, strings.ToUpper(strings.TrimSpace(m))) {
			return fmt.Errorf("target.sasl.mechanism %q; allowed %s", m, strings.Join(clientprops.Mechanisms, ", "))
		}
		return nil
	}
	_, err := s.ClientConfig()
	return err
}

// CheckClientTarget checks the client properties (the target block, --command-config) and
// security.inter.broker.protocol against the target, wrapping ErrTargetSetting: a kafka://
// target takes every client property but has its own inter-broker protocol; the embedded
// cluster takes only target.security.protocol and target.sasl.mechanism (it makes the
// credentials and certificates); kfake runs plaintext.
func (s *Spec) CheckClientTarget(target string) error {
	if target == "" {
		target = s.TargetName()
	}
	if strings.HasPrefix(target, "kafka://") {
		if p := s.Broker.InterBrokerProtocol; p != "" && p != "PLAINTEXT" {
			return fmt.Errorf("%w: security.inter.broker.protocol=%s applies to the embedded cluster; a kafka:// cluster replicates over its own", ErrTargetSetting, p)
		}
		return nil
	}
	return s.checkEmbeddedClient(target)
}

// clientConfigEntries are the target block's properties for Config(): target.<key>, secrets
// as [hidden].
func (s *Spec) clientConfigEntries() map[string]any {
	if len(s.Client) == 0 {
		return nil
	}
	m := make(map[string]any, len(s.Client))
	for k, v := range s.Client {
		if clientprops.IsSecret(k) {
			v = clientprops.Hidden
		}
		m[targetPrefix+k] = v
	}
	return m
}

func cloneClient(m map[string]string) map[string]string { return maps.Clone(m) }

// clientSecurity builds the target's client options and checks, with one connection, that
// the target accepts them. A security refusal (or unusable settings) wraps ErrTargetConnect;
// an unreachable target is an ordinary error (a cluster may be restarting), returned with the
// options.
func clientSecurity(ctx context.Context, name string, hosts []string, s *Spec) ([]kgo.Opt, error) {
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

// clientOpts are the options every client of a run starts from: the seeds and the target's
// security.
func clientOpts(seeds []string, sec []kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...)
}

// securedTarget is a Target whose clients need security options (a kafka:// target with a
// target block).
type securedTarget interface{ clientSecurity() []kgo.Opt }

// targetSecurity returns t's client security options, nil for a plaintext target.
func targetSecurity(t Target) []kgo.Opt {
	if st, ok := t.(securedTarget); ok {
		return st.clientSecurity()
	}
	return nil
}

// applyTargetNode reads the spec's target block (a mapping): bootstrap.servers and client
// properties, each a single value given once.
func (s *Spec) applyTargetNode(m *yaml.Node) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: target.%s: want a single value, got a %s", v.Line, k.Value, nodeKind(v))
		}
		if line, dup := seen[k.Value]; dup {
			return fmt.Errorf("line %d: target.%s given twice (first on line %d)", k.Line, k.Value, line)
		}
		seen[k.Value] = k.Line
		val := v.Value
		if v.Tag == "!!null" {
			val = "" // ssl.endpoint.identification.algorithm: (empty) turns the host name check off
		}
		if err := s.setClientProp(k.Value, val); err != nil {
			return fmt.Errorf("line %d: %w", k.Line, err)
		}
	}
	return nil
}
