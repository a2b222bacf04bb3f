package clientprops

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Hidden is what a secret shows as, everywhere: Kafka's rendering of a Password config.
const Hidden = "[hidden]"

// Protocol is security.protocol.
type Protocol string

// The security protocols, by Kafka's names.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// Protocols lists the security protocols, for help and errors.
var Protocols = []Protocol{Plaintext, SSL, SASLPlaintext, SASLSSL}

// TLS reports whether the protocol runs over TLS (SSL, SASL_SSL).
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether the protocol authenticates with SASL (SASL_PLAINTEXT, SASL_SSL).
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// ParseProtocol reads a security.protocol value (case-insensitive, as Kafka).
func ParseProtocol(v string) (Protocol, error) {
	p := Protocol(strings.ToUpper(strings.TrimSpace(v)))
	if !slices.Contains(Protocols, p) {
		return "", fmt.Errorf("security.protocol %q; allowed PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", v)
	}
	return p, nil
}

// The SASL mechanisms, by Kafka's names.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
	MechAWSMSKIAM   = "AWS_MSK_IAM"
)

// Mechanisms are the sasl.mechanism values a Config accepts.
var Mechanisms = []string{MechPlain, MechScramSHA256, MechScramSHA512, MechOAuthBearer, MechAWSMSKIAM}

// ErrAWSNotBuilt is returned for sasl.mechanism=AWS_MSK_IAM: this build does not carry the AWS
// SDK that resolves the standard AWS credential chain.
var ErrAWSNotBuilt = errors.New("sasl.mechanism AWS_MSK_IAM is not supported in this build (it needs the AWS SDK's credential chain, which isrbench is not built with); use SCRAM-SHA-512 on the cluster's SASL/SCRAM listener")

// secret holds a password, token or private key: every way of printing it gives Hidden.
type secret string

func (secret) String() string                  { return Hidden }
func (secret) GoString() string                { return Hidden }
func (secret) Format(f fmt.State, _ rune)      { f.Write([]byte(Hidden)) }
func (secret) MarshalText() ([]byte, error)    { return []byte(Hidden), nil }
func (s secret) reveal() string                { return string(s) }
func (s secret) set() bool                     { return s != "" }
func (secret) MarshalJSON() ([]byte, error)    { return []byte(`"` + Hidden + `"`), nil }
func (secret) MarshalYAML() (any, error)       { return Hidden, nil }
func (s *secret) UnmarshalText(b []byte) error { *s = secret(b); return nil }

// Config is the security of a client: what New read from the properties. The zero Config is
// PLAINTEXT without SASL. Immutable after New.
type Config struct {
	Protocol  Protocol
	Mechanism string // sasl.mechanism; "" without SASL
	User      string // PLAIN and SCRAM: the user name (not a secret)
	password  secret
	// scramToken: the SCRAM credentials are a delegation token (jaas tokenauth=true).
	scramToken bool
	// tokenFile holds the OAUTHBEARER token (sasl.oauthbearer.token.endpoint.url=file://...),
	// read at every authentication so that a rotated token is picked up.
	tokenFile  string
	extensions map[string]string // OAUTHBEARER SASL extensions (jaas extension_NAME)

	// TLS trust: a PEM file or directory of CA certificates, or inline PEM; none: the system's.
	caFile string
	caPEM  string
	// TLS client certificate (mTLS): PEM files, or inline PEM.
	certFile, keyFile string
	certPEM           string
	keyPEM            secret
	// VerifyHostname is ssl.endpoint.identification.algorithm=https (the default): the
	// certificate must name the host dialled. Off, the chain is still verified.
	VerifyHostname bool
	minTLS, maxTLS uint16

	props   Props
	ignored []string
	notes   []string
}

// IsZero reports whether c is plain PLAINTEXT with no property given.
func (c *Config) IsZero() bool { return c == nil || (len(c.props) == 0 && c.Protocol == Plaintext) }

// Props returns the properties c was built from.
func (c *Config) Props() Props { return c.props }

// Ignored lists the keys c read but does not use (not about security, or settings isrbench
// has no use for such as ssl.cipher.suites): commands print them as a note.
func (c *Config) Ignored() []string { return c.ignored }

// Notes are warnings about settings that have no effect (ssl.* under PLAINTEXT, ...).
func (c *Config) Notes() []string { return c.notes }

// String is a one-line summary without secrets, e.g. "SASL_SSL SCRAM-SHA-512 user alice".
func (c *Config) String() string {
	if c == nil {
		return string(Plaintext)
	}
	s := string(c.Protocol)
	if c.Protocol.SASL() {
		s += " " + c.Mechanism
		if c.User != "" {
			s += " user " + c.User
		}
	}
	return s
}

// Format prints c as String does, whatever the verb (%v, %+v, %#v): a Config printed by
// mistake shows no secret.
func (c Config) Format(f fmt.State, _ rune) { io.WriteString(f, c.String()) }

// scrub replaces every secret of c in s by Hidden: the last guard of an error message built
// from text c does not control (a server's error message, a library's error).
func (c *Config) scrub(s string) string {
	if c == nil {
		return s
	}
	for _, v := range []string{c.password.reveal(), c.keyPEM.reveal()} {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, Hidden)
		}
	}
	for _, p := range c.props {
		if IsSecret(p.Key) && len(p.Value) >= 3 {
			s = strings.ReplaceAll(s, p.Value, Hidden)
		}
	}
	return s
}

// secretKeys are the Password-typed client configs of Kafka and librdkafka that isrbench knows.
var secretKeys = map[string]bool{
	"sasl.jaas.config":        true,
	"sasl.password":           true,
	"ssl.key.password":        true,
	"ssl.keystore.password":   true,
	"ssl.keystore.key":        true,
	"ssl.truststore.password": true,
	"sasl.oauthbearer.client.credentials.client.secret": true,
	"sasl.oauthbearer.config":                           true,
	"ssl.key.pem":                                       true,
}

// IsSecret reports whether the value of key must be shown as Hidden: Kafka's Password configs
// and any key that names a password, secret, token or private key.
func IsSecret(key string) bool {
	k := strings.ToLower(key)
	return secretKeys[k] || strings.Contains(k, "password") || strings.Contains(k, "secret") ||
		strings.Contains(k, "token") && !strings.Contains(k, "endpoint") || strings.HasSuffix(k, ".key") || strings.Contains(k, "jaas")
}

// Redacted returns the properties with every secret value replaced by Hidden, for the
// recorded config of a run.
func (c *Config) Redacted() map[string]string {
	if c == nil {
		return nil
	}
	m := make(map[string]string, len(c.props))
	for _, p := range c.props {
		if IsSecret(p.Key) {
			m[p.Key] = Hidden
		} else {
			m[p.Key] = p.Value
		}
	}
	return m
}

// used are the keys New reads; other keys are reported by Ignored.
var used = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.mechanisms": true,
	"sasl.jaas.config": true, "sasl.username": true, "sasl.password": true,
	"sasl.oauthbearer.token.endpoint.url": true,
	"ssl.truststore.location":             true, "ssl.truststore.type": true, "ssl.truststore.password": true,
	"ssl.truststore.certificates": true, "ssl.ca.location": true, "ssl.ca.pem": true,
	"ssl.keystore.location": true, "ssl.keystore.type": true, "ssl.keystore.password": true,
	"ssl.key.password": true, "ssl.keystore.certificate.chain": true, "ssl.keystore.key": true,
	"ssl.certificate.location": true, "ssl.key.location": true, "ssl.certificate.pem": true, "ssl.key.pem": true,
	"ssl.endpoint.identification.algorithm": true, "ssl.enabled.protocols": true, "ssl.protocol": true,
}

// Known reports whether New reads key (the rest are accepted and listed by Ignored).
func Known(key string) bool { return used[key] }

// KnownKeys lists the keys New reads, sorted.
func KnownKeys() []string {
	out := make([]string, 0, len(used))
	for k := range used {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// New checks the properties and returns the client security they describe. It reads no
// file (Opts does). Errors name the key and the allowed values, never a secret.
func New(p Props) (*Config, error) {
	m := p.Map()
	c := &Config{Protocol: Plaintext, VerifyHostname: true, props: p}
	seen := map[string]bool{}
	for _, pr := range p {
		if !used[pr.Key] && !seen[pr.Key] {
			c.ignored = append(c.ignored, pr.Key)
		}
		seen[pr.Key] = true
	}
	if v, ok := m["security.protocol"]; ok {
		pr, err := ParseProtocol(v)
		if err != nil {
			return nil, err
		}
		c.Protocol = pr
	}
	if err := c.readSASL(m); err != nil {
		return nil, err
	}
	if err := c.readTLS(m); err != nil {
		return nil, err
	}
	return c, nil
}

// FromMap is New over a map (the spec's target block), in key order.
func FromMap(m map[string]string) (*Config, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p := make(Props, 0, len(keys))
	for _, k := range keys {
		p = append(p, Property{Key: k, Value: m[k]})
	}
	return New(p)
}

func (c *Config) readSASL(m map[string]string) error {
	mech, hasMech := m["sasl.mechanism"]
	if v, ok := m["sasl.mechanisms"]; ok { // librdkafka's name
		if hasMech && !strings.EqualFold(strings.TrimSpace(v), strings.TrimSpace(mech)) {
			return fmt.Errorf("sasl.mechanism %q and sasl.mechanisms %q disagree; give one", mech, v)
		}
		mech, hasMech = v, true
	}
	mech = strings.ToUpper(strings.TrimSpace(mech))
	_, hasJAAS := m["sasl.jaas.config"]
	_, hasUser := m["sasl.username"]
	if !c.Protocol.SASL() {
		if hasMech || hasJAAS || hasUser {
			c.notes = append(c.notes, fmt.Sprintf("sasl.* settings are not used with security.protocol=%s (use SASL_PLAINTEXT or SASL_SSL)", c.Protocol))
		}
		return nil
	}
	switch {
	case !hasMech || mech == "":
		return fmt.Errorf("security.protocol=%s needs sasl.mechanism (Kafka's default GSSAPI is not supported); allowed %s", c.Protocol, strings.Join(Mechanisms, ", "))
	case mech == "GSSAPI":
		return fmt.Errorf("sasl.mechanism GSSAPI (Kerberos) is not supported; allowed %s", strings.Join(Mechanisms, ", "))
	case mech == MechAWSMSKIAM:
		return ErrAWSNotBuilt
	case !slices.Contains(Mechanisms, mech):
		return fmt.Errorf("sasl.mechanism %q; allowed %s", mech, strings.Join(Mechanisms, ", "))
	}
	c.Mechanism = mech
	var j JAAS
	if v, ok := m["sasl.jaas.config"]; ok {
		var err error
		if j, err = ParseJAAS(v); err != nil {
			return err
		}
		want := map[string]string{MechPlain: PlainLoginModule, MechScramSHA256: ScramLoginModule,
			MechScramSHA512: ScramLoginModule, MechOAuthBearer: OAuthLoginModule}[mech]
		if j.Module != want {
			return fmt.Errorf("sasl.jaas.config: login module %s does not go with sasl.mechanism=%s (want %s)", j.Module, mech, want)
		}
	}
	if mech == MechOAuthBearer {
		return c.readOAuth(m, j)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if u, ok := m["sasl.username"]; ok {
		if hasJAAS {
			return fmt.Errorf("sasl.username/sasl.password and sasl.jaas.config both give credentials; give one")
		}
		user, pass = u, m["sasl.password"]
	}
	if user == "" {
		return fmt.Errorf("sasl.mechanism=%s needs a user: sasl.jaas.config=%s required username=\"...\" password=\"...\"; (or librdkafka's sasl.username and sasl.password)", mech, map[bool]string{true: PlainLoginModule, false: ScramLoginModule}[mech == MechPlain])
	}
	if pass == "" {
		return fmt.Errorf("sasl.mechanism=%s: user %s has no password (sasl.jaas.config password=\"...\" or sasl.password)", mech, user)
	}
	c.User, c.password = user, secret(pass)
	c.scramToken = strings.EqualFold(j.Options["tokenauth"], "true")
	return nil
}

func (c *Config) readOAuth(m map[string]string, j JAAS) error {
	for k := range j.Options {
		if strings.HasPrefix(k, "unsecuredLogin") {
			return fmt.Errorf("sasl.jaas.config: %s (an unsecured JWT made by the client) is not supported; write a token to a file and set sasl.oauthbearer.token.endpoint.url=file:///path/to/token", k)
		}
		if name, ok := strings.CutPrefix(k, "extension_"); ok {
			if c.extensions == nil {
				c.extensions = map[string]string{}
			}
			c.extensions[name] = j.Options[k]
		}
	}
	u, ok := m["sasl.oauthbearer.token.endpoint.url"]
	if !ok || u == "" {
		return fmt.Errorf("sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url=file:///path/to/token (a static token file, read at every login)")
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "file" || pu.Path == "" {
		return fmt.Errorf("sasl.oauthbearer.token.endpoint.url %q: only a file:///path/to/token URL is supported (a token endpoint is not)", u)
	}
	c.tokenFile = pu.Path
	return nil
}

func (c *Config) readTLS(m map[string]string) error {
	get := func(k string) string { return strings.TrimSpace(m[k]) }
	var anySSL []string
	for k := range m {
		if strings.HasPrefix(k, "ssl.") {
			anySSL = append(anySSL, k)
		}
	}
	if !c.Protocol.TLS() {
		if len(anySSL) > 0 {
			sort.Strings(anySSL)
			c.notes = append(c.notes, fmt.Sprintf("%s not used with security.protocol=%s (use SSL or SASL_SSL)", strings.Join(anySSL, ", "), c.Protocol))
		}
		return nil
	}
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if t := get(k); t != "" && !strings.EqualFold(t, "PEM") {
			return fmt.Errorf("%s %s: isrbench reads PEM files only (ssl.truststore.type=PEM / ssl.keystore.type=PEM); convert a JKS or PKCS12 store with keytool -exportcert -rfc and openssl pkcs12 -nodes", k, t)
		}
	}
	trust := []string{}
	for _, k := range []string{"ssl.truststore.location", "ssl.ca.location", "ssl.truststore.certificates", "ssl.ca.pem"} {
		if get(k) != "" {
			trust = append(trust, k)
		}
	}
	if len(trust) > 1 {
		return fmt.Errorf("%s all give the trusted CAs; give one", strings.Join(trust, " and "))
	}
	c.caFile = get("ssl.truststore.location")
	if v := get("ssl.ca.location"); v != "" {
		if v == "probe" {
			c.notes = append(c.notes, "ssl.ca.location=probe: the system's CA certificates are used")
		} else {
			c.caFile = v
		}
	}
	c.caPEM = m["ssl.truststore.certificates"] + m["ssl.ca.pem"]

	ks, cert, key := get("ssl.keystore.location"), get("ssl.certificate.location"), get("ssl.key.location")
	inlineCert, inlineKey := m["ssl.keystore.certificate.chain"]+m["ssl.certificate.pem"], m["ssl.keystore.key"]+m["ssl.key.pem"]
	switch {
	case ks != "" && (cert != "" || key != "" || inlineCert != "" || inlineKey != ""):
		return fmt.Errorf("ssl.keystore.location and ssl.certificate.location/ssl.key.location (or the inline keys) all give the client certificate; give one")
	case ks != "":
		c.certFile, c.keyFile = ks, ks // a PEM keystore holds the key and the chain
	case (cert != "") != (key != ""):
		return fmt.Errorf("ssl.certificate.location and ssl.key.location go together (the client certificate and its private key)")
	case cert != "":
		c.certFile, c.keyFile = cert, key
	case (inlineCert != "") != (inlineKey != ""):
		return fmt.Errorf("ssl.keystore.certificate.chain and ssl.keystore.key go together (the client certificate and its private key)")
	case inlineCert != "":
		c.certPEM, c.keyPEM = inlineCert, secret(inlineKey)
	}
	if v, ok := m["ssl.endpoint.identification.algorithm"]; ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "https":
		case "", "none":
			c.VerifyHostname = false
		default:
			return fmt.Errorf("ssl.endpoint.identification.algorithm %q; allowed https (the default: the certificate must name the broker's host) or \"\" (or none) to skip the host name check", v)
		}
	}
	var err error
	if c.minTLS, c.maxTLS, err = tlsVersions(get("ssl.protocol"), get("ssl.enabled.protocols")); err != nil {
		return err
	}
	return nil
}
