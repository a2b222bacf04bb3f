package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/internal/clientprops"
	"github.com/isrbench/isrbench/workloads/spec"
)

// commandConfigHelp is the help of --command-config, on every command that talks to a cluster.
const commandConfigHelp = "Kafka client properties file (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ... as kafka-*.sh --command-config; librdkafka's names as kcat -F also work)"

// addCommandConfig registers --command-config on fs.
func addCommandConfig(fs *flag.FlagSet) *string {
	return fs.String("command-config", "", commandConfigHelp)
}

// loadCommandConfig reads --command-config (empty: PLAINTEXT) into a client Config and
// prints its notes (keys it does not use, settings without effect) to stderr. A bad file is a
// usage error.
func loadCommandConfig(cmd, path string, stderr io.Writer) (*clientprops.Config, error) {
	if path == "" {
		return clientprops.New(nil)
	}
	p, err := clientprops.Load(path)
	if err != nil {
		return nil, usagef("%s: --command-config: %v", cmd, err)
	}
	c, err := clientprops.New(p)
	if err != nil {
		return nil, usagef("%s: --command-config %s: %v", cmd, path, err)
	}
	printClientNotes(cmd, path, c.Ignored(), c.Notes(), stderr)
	return c, nil
}

func printClientNotes(cmd, path string, ignored, notes []string, stderr io.Writer) {
	if len(ignored) > 0 {
		fmt.Fprintf(stderr, "%s: %s: not used by isrbench (no security setting): %s\n", cmd, path, strings.Join(ignored, ", "))
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "%s: %s: %s\n", cmd, path, n)
	}
}

// newAdmin returns an admin client for --bootstrap host:port[,host:port] with the security
// of --command-config, after one request has shown that the cluster accepts it (Close closes
// its kgo client). A bad address or file, and a refusal of the client's security (wrong
// credentials, an untrusted certificate, TLS against plaintext), are usage errors (exit 2);
// an unreachable cluster is a failure (exit 1).
func newAdmin(ctx context.Context, cmd, bootstrap, commandConfig string, stderr io.Writer) (*kadm.Client, error) {
	cl, err := newKgoClient(ctx, cmd, bootstrap, commandConfig, stderr)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// newKgoClient is newAdmin's kgo client, for commands that send raw requests (verify-replicas).
func newKgoClient(ctx context.Context, cmd, bootstrap, commandConfig string, stderr io.Writer) (*kgo.Client, error) {
	addrs, err := checkBootstrap(cmd, bootstrap)
	if err != nil {
		return nil, err
	}
	sec, err := loadCommandConfig(cmd, commandConfig, stderr)
	if err != nil {
		return nil, err
	}
	opts, err := sec.Opts()
	if err != nil {
		return nil, usagef("%s: --command-config %s: %v", cmd, commandConfig, err)
	}
	if !sec.IsZero() {
		if err := clientprops.Check(ctx, addrs, sec); err != nil {
			var ce *clientprops.CheckError
			if errors.As(err, &ce) && ce.Unreachable {
				return nil, fmt.Errorf("%s: %w", cmd, err)
			}
			return nil, usagef("%s: %v", cmd, err)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		return nil, usagef("%s: --bootstrap %q: %v", cmd, bootstrap, err)
	}
	return cl, nil
}

// mergeCommandConfig adds --command-config's properties to the spec's target block (run,
// sweep, gate) and prints its notes.
func mergeCommandConfig(s *spec.Spec, path string, stderr io.Writer) error {
	if path == "" {
		return nil
	}
	p, err := clientprops.Load(path)
	if err != nil {
		return usagef("--command-config: %v", err)
	}
	ignored := s.MergeClientProps(p)
	c, err := s.ClientConfig()
	if err != nil {
		return usagef("--command-config %s: %v", path, err)
	}
	printClientNotes("command config", path, ignored, c.Notes(), stderr)
	return nil
}
