package target

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
	"github.com/isrbench/isrbench/workloads/spec"
)

// The embedded cluster's security, for what encryption costs replication: the spec's
// security.inter.broker.protocol is the protocol the brokers replicate over, and
// target.security.protocol (with target.sasl.mechanism, default SCRAM-SHA-512) the one the
// harness's clients use. When either is not PLAINTEXT the run makes a CA and broker
// certificates in the cluster's data dir, a listener per protocol on ephemeral ports, and a
// SCRAM user for its clients with a random password that is never recorded. Under TLS the
// fetch responses go through the copy path: the cost table shows the bytes that stopped
// being zero-copy.

// embeddedSecurity sets cc's listeners for the spec's protocols (dir: the cluster's data
// dir, where the certificates go) and returns the listener the clients use and their
// client config; "" and nil when both protocols are PLAINTEXT (the default cluster).
func embeddedSecurity(s *spec.Spec, cc *cluster.Config, dir string) (string, *clientprops.Config, error) {
	inter := s.InterBrokerProtocol
	if inter == "" {
		inter = "PLAINTEXT"
	}
	cp := spec.TargetProtocolParam.Get(s).(string)
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
			e.seeds = spec.SplitList(l.Bootstrap)
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
