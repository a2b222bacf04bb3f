package workloads

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/internal/certs"
	"github.com/isrbench/isrbench/internal/clientprops"
)

// The embedded cluster's security, for what encryption costs replication: the spec's
// security.inter.broker.protocol is the protocol the brokers replicate over, and
// target.security.protocol (with target.sasl.mechanism, default SCRAM-SHA-512) the one the
// harness's clients use. When either is not PLAINTEXT the run makes a CA and broker
// certificates in the cluster's data dir, a listener per protocol on ephemeral ports, and a
// SCRAM user for its clients with a random password that is never recorded. Under TLS the
// fetch responses go through the copy path: the cost table shows the bytes that stopped
// being zero-copy.

// securityProtocols are the values of security.inter.broker.protocol and
// target.security.protocol.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// targetProtocolParam is target.security.protocol as a flat key, so that a sweep can vary it
// (the other client properties are set through the target block, see security.go).
var targetProtocolParam = Param{Key: "target.security.protocol",
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

// embeddedClientKeys are the target block's keys the embedded target takes.
var embeddedClientKeys = []string{"security.protocol", "sasl.mechanism"}

// checkEmbeddedClient refuses, for the embedded target or kfake, target block keys other
// than the security protocol and SASL mechanism (the run makes the rest), and any security
// on kfake.
func (s *Spec) checkEmbeddedClient(target string) error {
	var bad []string
	for k, v := range s.Client {
		switch {
		case target == "kfake" && !(k == "security.protocol" && strings.EqualFold(v, "PLAINTEXT")):
			bad = append(bad, targetPrefix+k)
		case target != "kfake" && !slices.Contains(embeddedClientKeys, k):
			bad = append(bad, targetPrefix+k)
		}
	}
	if target == "kfake" && s.Broker.InterBrokerProtocol != "PLAINTEXT" {
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

// embeddedSecurity sets cc's listeners for the spec's protocols (dir: the cluster's data
// dir, where the certificates go) and returns the listener the clients use and their
// client config; "" and nil when both protocols are PLAINTEXT (the default cluster).
func (s *Spec) embeddedSecurity(cc *cluster.Config, dir string) (string, *clientprops.Config, error) {
	inter := s.Broker.InterBrokerProtocol
	if inter == "" {
		inter = "PLAINTEXT"
	}
	cp := targetProtocolParam.get(s).(string)
	if inter == "PLAINTEXT" && cp == "PLAINTEXT" {
		return "", nil, nil
	}
	listeners := []string{inter + "://127.0.0.1:0"}
	if cp != inter {
		listeners = append(listeners, cp+"://127.0.0.1:0")
	}
	sets := []string{"listeners=" + strings.Join(listeners, ","), "security.inter.broker.protocol=" + inter}
	props := clientprops.Props{{Key: "security.protocol", Value: cp}}
	if strings.HasSuffix(inter, "SSL") || strings.HasSuffix(cp, "SSL") {
		files, err := certs.Write(filepath.Join(dir, "tls"), nil)
		if err != nil {
			return "", nil, err
		}
		sets = append(sets, "ssl.keystore.location="+files.BrokerKeystore, "ssl.truststore.location="+files.CA)
		props = append(props, clientprops.Property{Key: "ssl.ca.location", Value: files.CA})
	}
	if strings.HasPrefix(inter, "SASL") || strings.HasPrefix(cp, "SASL") {
		mech := strings.ToUpper(strings.TrimSpace(s.Client["sasl.mechanism"]))
		if mech == "" {
			mech = clientprops.MechScramSHA512
		}
		if !slices.Contains([]string{clientprops.MechPlain, clientprops.MechScramSHA256, clientprops.MechScramSHA512}, mech) {
			return "", nil, fmt.Errorf("target.sasl.mechanism %s: the embedded cluster serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", mech)
		}
		sets = append(sets, "sasl.enabled.mechanisms="+mech, "sasl.mechanism.inter.broker.protocol="+mech)
		var pw [24]byte
		rand.Read(pw[:])
		pass := base64.RawURLEncoding.EncodeToString(pw[:])
		store := mech
		if mech == clientprops.MechPlain {
			store = clientprops.MechScramSHA512 // PLAIN checks against a SCRAM credential
		}
		u, err := cluster.ParseAddScram(store + "=[name=isrbench-bench,password=" + pass + "]")
		if err != nil {
			return "", nil, err
		}
		cc.Security.Users = append(cc.Security.Users, u)
		if strings.HasPrefix(cp, "SASL") {
			props = append(props, clientprops.Property{Key: "sasl.mechanism", Value: mech},
				clientprops.Property{Key: "sasl.username", Value: "isrbench-bench"}, clientprops.Property{Key: "sasl.password", Value: pass})
		}
	}
	for _, kv := range sets {
		if err := cc.SetKV(kv); err != nil {
			return "", nil, fmt.Errorf("embedded cluster security: %w", err)
		}
	}
	c, err := clientprops.New(props)
	if err != nil {
		return "", nil, fmt.Errorf("embedded cluster clients: %w", err)
	}
	return cp, c, nil
}

// secure points the embedded target's clients at the client listener with its security.
func (e *embedded) secure(listener string, c *clientprops.Config) error {
	if c == nil {
		return nil
	}
	for _, l := range e.c.Listeners() {
		if l.Name == listener {
			e.seeds = splitList(l.Bootstrap)
		}
	}
	opts, err := c.Opts()
	if err != nil {
		return fmt.Errorf("embedded cluster clients: %w", err)
	}
	e.sec = opts
	return nil
}

func (e *embedded) clientSecurity() []kgo.Opt { return e.sec }
