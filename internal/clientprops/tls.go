package clientprops

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tlsVersions reads ssl.protocol (TLSv1.2 caps the version at 1.2; TLS or TLSv1.3 leave it
// open) and ssl.enabled.protocols (a list of TLSv1.2, TLSv1.3): the lowest and highest
// versions allowed. TLS 1.0 and 1.1 are not offered, as in Kafka since 3.0.
func tlsVersions(protocol, enabled string) (lo, hi uint16, err error) {
	lo, hi = tls.VersionTLS12, tls.VersionTLS13
	names := map[string]uint16{"TLSV1.2": tls.VersionTLS12, "TLSV1.3": tls.VersionTLS13}
	switch p := strings.ToUpper(protocol); p {
	case "", "TLS", "TLSV1.3":
	case "TLSV1.2":
		hi = tls.VersionTLS12
	default:
		return 0, 0, fmt.Errorf("ssl.protocol %q; allowed TLSv1.2, TLSv1.3 or TLS", protocol)
	}
	if enabled == "" {
		return lo, hi, nil
	}
	elo, ehi := uint16(0xffff), uint16(0)
	for _, v := range strings.Split(enabled, ",") {
		n, ok := names[strings.ToUpper(strings.TrimSpace(v))]
		if !ok {
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: %q; allowed TLSv1.2, TLSv1.3", strings.TrimSpace(v))
		}
		elo, ehi = min(elo, n), max(ehi, n)
	}
	lo, hi = max(lo, elo), min(hi, ehi)
	if lo > hi {
		return 0, 0, fmt.Errorf("ssl.protocol %s and ssl.enabled.protocols %s leave no TLS version", protocol, enabled)
	}
	return lo, hi, nil
}

// TLSConfig builds the client's TLS configuration: the trusted CAs (the system's if none is
// given), the client certificate if any, hostname verification as
// ssl.endpoint.identification.algorithm says. nil for a protocol without TLS. Errors name the
// file and the problem, never a key's bytes.
func (c *Config) TLSConfig() (*tls.Config, error) {
	if c == nil || !c.Protocol.TLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: c.minTLS, MaxVersion: c.maxTLS}
	var err error
	switch {
	case c.caFile != "":
		if cfg.RootCAs, err = loadCAs(c.caFile); err != nil {
			return nil, err
		}
	case c.caPEM != "":
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM([]byte(c.caPEM)) {
			return nil, errors.New("ssl.truststore.certificates: no PEM CERTIFICATE block")
		}
	}
	switch {
	case c.certFile != "":
		cert, err := loadKeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	case c.certPEM != "":
		cert, err := keyPair([]byte(c.certPEM), []byte(c.keyPEM.reveal()), "ssl.keystore.certificate.chain", "ssl.keystore.key")
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if !c.VerifyHostname {
		// Verify the chain against the roots, but not the host name: Go verifies both or
		// neither, so skip its check and do the chain here.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			if err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			return nil
		}
	}
	return cfg, nil
}

// LoadCAs reads a PEM file of CA certificates (or a directory of them), as
// ssl.truststore.location with ssl.truststore.type=PEM.
func LoadCAs(path string) (*x509.CertPool, error) { return loadCAs(path) }

// LoadKeyPair reads a certificate chain and its unencrypted private key from PEM files (the
// same file for a PEM keystore, ssl.keystore.location with ssl.keystore.type=PEM).
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	return loadKeyPair(certFile, keyFile)
}

// loadCAs reads a PEM file of CA certificates, or every *.pem, *.crt and *.cer file of a
// directory (librdkafka's ssl.ca.location may be one).
func loadCAs(path string) (*x509.CertPool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trusted CAs: %w", err)
	}
	files := []string{path}
	if st.IsDir() {
		files = nil
		for _, pat := range []string{"*.pem", "*.crt", "*.cer"} {
			m, _ := filepath.Glob(filepath.Join(path, pat))
			files = append(files, m...)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("trusted CAs: directory %s has no *.pem, *.crt or *.cer file", path)
		}
	}
	pool := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("trusted CAs: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("trusted CAs: %s holds no PEM CERTIFICATE block (a JKS or PKCS12 truststore? isrbench reads PEM: keytool -exportcert -rfc)", f)
		}
	}
	return pool, nil
}

func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate: %w", err)
	}
	var kb []byte // nil: the key is in the certificate's file (a PEM keystore)
	if keyFile != certFile {
		if kb, err = os.ReadFile(keyFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("client key: %w", err)
		}
	}
	return keyPair(cb, kb, certFile, keyFile)
}

// keyPair parses a certificate chain and its private key from PEM (both may be in one file).
// An encrypted key is refused: isrbench does not decrypt keys.
func keyPair(certPEM, keyPEM []byte, certName, keyName string) (tls.Certificate, error) {
	var certs, keys []*pem.Block
	for _, src := range [][]byte{certPEM, keyPEM} {
		for rest := src; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			switch {
			case b.Type == "CERTIFICATE":
				certs = append(certs, b)
			case strings.Contains(b.Type, "ENCRYPTED") || b.Headers["Proc-Type"] != "":
				return tls.Certificate{}, fmt.Errorf("%s: the private key is encrypted; isrbench reads an unencrypted PEM key (openssl pkey -in KEY -out PLAIN.key), with file permissions to protect it", keyName)
			case strings.HasSuffix(b.Type, "PRIVATE KEY"):
				keys = append(keys, b)
			}
		}
	}
	if len(certs) == 0 {
		return tls.Certificate{}, fmt.Errorf("%s: no PEM CERTIFICATE block", certName)
	}
	if len(keys) == 0 {
		return tls.Certificate{}, fmt.Errorf("%s: no PEM PRIVATE KEY block", keyName)
	}
	cb := make([]byte, 0, 4096)
	for _, b := range certs {
		cb = append(cb, pem.EncodeToMemory(b)...)
	}
	cert, err := tls.X509KeyPair(cb, pem.EncodeToMemory(keys[0]))
	if err != nil {
		// crypto/tls's messages name the problem (mismatch, unknown type), not the bytes.
		return tls.Certificate{}, fmt.Errorf("%s with %s: %w", certName, keyName, err)
	}
	return cert, nil
}
