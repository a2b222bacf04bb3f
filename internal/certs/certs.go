// Package certs makes the TLS material of a quick start and of tests: a CA, and
// certificates it signs for brokers and clients, written as PEM files in the layout Kafka's
// PEM stores take (ssl.keystore.type=PEM: the key and the chain in one file;
// ssl.truststore.type=PEM: the CA). Keys are ECDSA P-256. Nothing here is for production.
//
// Concurrency: CA values are immutable after NewCA and may issue from any goroutine.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long generated certificates are valid (from an hour ago, for clock skew).
const Validity = 2 * 365 * 24 * time.Hour

// CA is a certificate authority that signs broker and client certificates.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate in PEM (the truststore of clients and brokers).
	CertPEM []byte
}

// NewCA makes a self-signed CA named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"isrbench"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	return &CA{Cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Pair is an issued certificate and its key, in PEM.
type Pair struct {
	CertPEM []byte // the certificate, then the CA's (the chain)
	KeyPEM  []byte // PKCS#8 "PRIVATE KEY"
}

// TLS returns the pair as a tls.Certificate.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// Issue signs a certificate for cn. hosts are its DNS names and IP addresses (a broker's
// advertised host names; a client certificate needs none). server and client choose the
// extended key usages.
func (ca *CA) Issue(cn string, hosts []string, server, client bool) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("key for %s: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"isrbench"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("certificate for %s: %w", cn, err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("key for %s: %w", cn, err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...)
	return Pair{CertPEM: chain, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic("BUG: crypto/rand failed: " + err.Error())
	}
	return n
}

// Files are the paths Write wrote, by role.
type Files struct {
	CA             string // ca.pem: the CA certificate (ssl.truststore.location, ssl.ca.location)
	BrokerKeystore string // broker.pem: the broker's key and chain (ssl.keystore.location, PEM)
	BrokerCert     string // broker.crt: the broker's chain alone
	BrokerKey      string // broker.key: the broker's key alone
	ClientKeystore string // client.pem: a client's key and chain (mTLS)
	ClientCert     string // client.crt
	ClientKey      string // client.key
}

// Write makes a CA and a broker certificate for hosts (plus localhost and 127.0.0.1) and a
// client certificate for mTLS, and writes them into dir (created 0700; keys 0600). It
// refuses to overwrite an existing ca.pem.
func Write(dir string, hosts []string) (Files, error) {
	f := Files{
		CA:             filepath.Join(dir, "ca.pem"),
		BrokerKeystore: filepath.Join(dir, "broker.pem"),
		BrokerCert:     filepath.Join(dir, "broker.crt"),
		BrokerKey:      filepath.Join(dir, "broker.key"),
		ClientKeystore: filepath.Join(dir, "client.pem"),
		ClientCert:     filepath.Join(dir, "client.crt"),
		ClientKey:      filepath.Join(dir, "client.key"),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("generate TLS: %w", err)
	}
	if _, err := os.Stat(f.CA); err == nil {
		return f, fmt.Errorf("generate TLS: %s exists; remove it or choose another directory", f.CA)
	}
	ca, err := NewCA("isrbench CA")
	if err != nil {
		return f, err
	}
	hs := append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	broker, err := ca.Issue("isrbench broker", hs, true, true) // brokers are clients of each other
	if err != nil {
		return f, err
	}
	client, err := ca.Issue("isrbench client", nil, false, true)
	if err != nil {
		return f, err
	}
	for _, w := range []struct {
		path string
		b    []byte
		mode os.FileMode
	}{
		{f.CA, ca.CertPEM, 0o644},
		{f.BrokerKeystore, append(append([]byte{}, broker.KeyPEM...), broker.CertPEM...), 0o600},
		{f.BrokerCert, broker.CertPEM, 0o644},
		{f.BrokerKey, broker.KeyPEM, 0o600},
		{f.ClientKeystore, append(append([]byte{}, client.KeyPEM...), client.CertPEM...), 0o600},
		{f.ClientCert, client.CertPEM, 0o644},
		{f.ClientKey, client.KeyPEM, 0o600},
	} {
		if err := os.WriteFile(w.path, w.b, w.mode); err != nil {
			return f, fmt.Errorf("generate TLS: %w", err)
		}
	}
	return f, nil
}
