package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/internal/certs"
)

// serveSecurity applies serve's --generate-tls and --add-scram to cfg.
func serveSecurity(cfg *cluster.Config, generateTLS string, addScram []string, stdout io.Writer) error {
	for _, s := range addScram {
		u, err := cluster.ParseAddScram(s)
		if err != nil {
			return usagef("serve: %v", err)
		}
		cfg.Security.Users = append(cfg.Security.Users, u)
	}
	if generateTLS != "" {
		files, reused, err := tlsFiles(generateTLS, cfg.Host)
		if err != nil {
			return fmt.Errorf("serve: --generate-tls: %w", err)
		}
		what := "wrote"
		if reused {
			what = "using"
		}
		fmt.Fprintf(stdout, "tls: %s %s (CA, for clients' ssl.truststore.location / ssl.ca.location), %s (broker key and chain), %s (client key and chain for mTLS)\n",
			what, files.CA, files.BrokerKeystore, files.ClientKeystore)
		if cfg.Security.KeystoreLocation == "" {
			cfg.Security.KeystoreLocation = files.BrokerKeystore
		}
		if cfg.Security.TruststoreLocation == "" {
			cfg.Security.TruststoreLocation = files.CA
		}
	}
	if err := cfg.Check(); err != nil {
		return usagef("serve: %v", err)
	}
	return nil
}

// tlsFiles writes the TLS material into dir, or reuses what an earlier --generate-tls wrote
// there (a restarted serve keeps its CA, so clients keep trusting it).
func tlsFiles(dir, host string) (certs.Files, bool, error) {
	var hosts []string
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.pem")); err == nil {
		f := certs.Files{CA: filepath.Join(dir, "ca.pem"), BrokerKeystore: filepath.Join(dir, "broker.pem"), BrokerCert: filepath.Join(dir, "broker.crt"),
			BrokerKey: filepath.Join(dir, "broker.key"), ClientKeystore: filepath.Join(dir, "client.pem"), ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
		if _, err := os.Stat(f.BrokerKeystore); err != nil {
			return f, false, fmt.Errorf("%s has ca.pem but no broker.pem: remove it or choose another directory", dir)
		}
		return f, true, nil
	}
	f, err := certs.Write(dir, hosts)
	return f, false, err
}

// printListeners prints each listener's bootstrap when the cluster has more than the default.
func printListeners(cl *cluster.Cluster, w io.Writer) {
	ls := cl.Listeners()
	if len(ls) == 1 && ls[0].Protocol == "PLAINTEXT" {
		return
	}
	for _, l := range ls {
		inter := ""
		if l.InterBroker {
			inter = " (inter-broker)"
		}
		fmt.Fprintf(w, "listener %s %s%s: %s\n", l.Name, l.Protocol, inter, l.Bootstrap)
	}
}
