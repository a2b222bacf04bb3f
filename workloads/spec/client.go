package spec

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/isrbench/isrbench/internal/clientprops"
)

// TargetPrefix is the flat-key prefix of the target block's client properties.
const TargetPrefix = "target."

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
		return fmt.Errorf("unknown key %q: the target block takes bootstrap.servers and the client properties %s", TargetPrefix+key, strings.Join(clientprops.KnownKeys(), ", "))
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
		onlyEmbedded = onlyEmbedded && slices.Contains(EmbeddedClientKeys, k)
	}
	if onlyEmbedded && !strings.HasPrefix(s.Target, "kafka://") {
		if _, err := clientprops.ParseProtocol(TargetProtocolParam.get(s).(string)); err != nil {
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
		m[TargetPrefix+k] = v
	}
	return m
}

func cloneClient(m map[string]string) map[string]string { return maps.Clone(m) }

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

// securityProtocols are the values of security.inter.broker.protocol and
// target.security.protocol.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// TargetProtocolParam is target.security.protocol as a flat key, so that a sweep can vary it
// (the other client properties are set through the target block, see client.go).
var TargetProtocolParam = Param{Key: "target.security.protocol",
	Help: "the harness clients' security.protocol (PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL), default PLAINTEXT; on the embedded target the cluster gets a listener of it",
	set: func(s *Spec, v string) error {
		p, err := clientprops.ParseProtocol(v)
		if err != nil {
			return fmt.Errorf("target.%w", err)
		}
		if s.Client == nil {
			s.Client = map[string]string{}
		}
		s.Client["security.protocol"] = string(p)
		return nil
	},
	get: func(s *Spec) any {
		if p, ok := s.Client["security.protocol"]; ok {
			return strings.ToUpper(strings.TrimSpace(p))
		}
		return "PLAINTEXT"
	}}

// EmbeddedClientKeys are the target block's keys the embedded target takes.
var EmbeddedClientKeys = []string{"security.protocol", "sasl.mechanism"}

// ErrTargetSetting is wrapped by the errors of settings a kafka:// cluster cannot be given
// (bad input: the command line maps it to exit status 2).
var ErrTargetSetting = errors.New("a setting cannot be applied to the target")

// ApplyAssume sets each assumed value on s (so result.json config records it), refusing a
// value the spec already gives differently (in its YAML or by --set).
func (s *Spec) ApplyAssume(assume map[string]string) error {
	keys := make([]string, 0, len(assume))
	for k := range assume {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := assume[k]
		if s.Given(k) {
			probe := DefaultSpec()
			_ = probe.Set(k, v) // checked by ParseAssume
			have, _ := s.Get(k)
			want, _ := probe.Get(k)
			if fmt.Sprint(have) != fmt.Sprint(want) {
				return fmt.Errorf("--assume %s=%s: the spec sets %s=%v; give one value", k, v, k, have)
			}
		}
		if err := s.Set(k, v); err != nil {
			return fmt.Errorf("--assume %s=%s: %w", k, v, err)
		}
	}
	return s.Validate()
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
		if p := s.InterBrokerProtocol; p != "" && p != "PLAINTEXT" {
			return fmt.Errorf("%w: security.inter.broker.protocol=%s applies to the embedded cluster; a kafka:// cluster replicates over its own", ErrTargetSetting, p)
		}
		return nil
	}
	return s.checkEmbeddedClient(target)
}

// checkEmbeddedClient refuses, for the embedded target or kfake, target block keys other
// than the security protocol and SASL mechanism (the run makes the rest), and any security
// on kfake.
func (s *Spec) checkEmbeddedClient(target string) error {
	var bad []string
	for k, v := range s.Client {
		switch {
		case target == "kfake" && !(k == "security.protocol" && strings.EqualFold(v, "PLAINTEXT")):
			bad = append(bad, TargetPrefix+k)
		case target != "kfake" && !slices.Contains(EmbeddedClientKeys, k):
			bad = append(bad, TargetPrefix+k)
		}
	}
	if target == "kfake" && s.InterBrokerProtocol != "PLAINTEXT" {
		bad = append(bad, "security.inter.broker.protocol")
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	if target == "kfake" {
		return fmt.Errorf("%w: %s: kfake runs plaintext (client security applies to a kafka:// target or the embedded cluster)", ErrTargetSetting, strings.Join(bad, ", "))
	}
	return fmt.Errorf("%w: %s: the embedded cluster makes its clients' credentials and certificates itself; it takes target.security.protocol and target.sasl.mechanism only (the rest applies to a kafka:// target)", ErrTargetSetting, strings.Join(bad, ", "))
}
