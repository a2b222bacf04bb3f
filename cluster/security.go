package cluster

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/internal/clientprops"
	"github.com/isrbench/isrbench/netfetch"
)

// Listeners and their security, by Kafka's broker config names:
//
//	listeners                         NAME://host:port,... (default: one PLAINTEXT listener
//	                                  on Host and BasePort); broker i listens on port+i,
//	                                  port 0 = ephemeral
//	listener.security.protocol.map    NAME:PROTOCOL,... for names that are not protocols
//	security.inter.broker.protocol    the protocol of the listener the brokers replicate
//	                                  over (default PLAINTEXT); or
//	inter.broker.listener.name        that listener by name (not both, as Kafka)
//	ssl.keystore.location             PEM: the broker's private key and certificate chain
//	ssl.keystore.type                 PEM (the only type read)
//	ssl.truststore.location           PEM CA certificates: client certificates are checked
//	                                  against them, and the replica fetchers trust them
//	ssl.client.auth                   none (default) | requested | required
//	ssl.endpoint.identification.algorithm  https (default) | "" : the replica fetchers'
//	                                  host name check of the inter-broker listener
//	sasl.enabled.mechanisms           PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default: all
//	                                  three; Kafka's default GSSAPI is not served)
//	sasl.mechanism.inter.broker.protocol  the replica fetchers' mechanism (default: the
//	                                  first enabled of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)
//	listener.name.<l>.<mech>.sasl.jaas.config  the brokers' own credentials on listener l
//	                                  (username and password of a ScramLoginModule or
//	                                  PlainLoginModule entry)
//
// The brokers' advertised address on each listener is its bind address. The broker
// registers its inter-broker listener's address with the controller (the replica fetchers
// dial it); Metadata, FindCoordinator and DescribeCluster answer a client with the brokers'
// addresses on the listener it came in on. Without a jaas config for a SASL inter-broker
// listener, the cluster makes its own broker user, isrbench-inter-broker, with a random
// password at every start. Users are SCRAM users of the metadata log; Users (serve
// --add-scram, Kafka's kafka-storage.sh format --add-scram) are set at start.

// ListenerConfig is one entry of listeners.
type ListenerConfig struct {
	Name string // a security protocol, or a name of listener.security.protocol.map
	Host string // bind (and advertised) host; "" = Config.Host
	Port int    // broker 0's port, broker i's is Port+i; 0 = ephemeral
}

// ScramUser is a SCRAM user set at start (--add-scram). Its password is never printed.
type ScramUser struct {
	Mechanism, Name string
	password        string
}

// Format prints the user without its password.
func (u ScramUser) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "%s=[name=%s,password=%s]", u.Mechanism, u.Name, clientprops.Hidden)
}

// SecurityConfig is the cluster's listeners and their security (see above). The zero value
// is one PLAINTEXT listener.
type SecurityConfig struct {
	Listeners            []ListenerConfig
	ProtocolMap          map[string]string
	InterBrokerListener  string
	InterBrokerProtocol  string
	KeystoreLocation     string
	TruststoreLocation   string
	ClientAuth           string // none, requested, required ("" = none)
	EndpointCheck        string // https or "" (hostCheckSet false: https)
	hostCheckSet         bool
	EnabledMechanisms    []string
	InterBrokerMechanism string
	// JAAS holds listener.name.<listener>.<mechanism>.sasl.jaas.config by
	// "<listener>.<mechanism>" in lower case. Values hold passwords: never printed.
	JAAS  map[string]string
	Users []ScramUser
}

// ParseAddScram reads kafka-storage.sh's --add-scram value:
// MECHANISM=[name=NAME,password=PASSWORD] (iterations optional and ignored: 4096).
func ParseAddScram(s string) (ScramUser, error) {
	mech, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	if controller.ScramHash(mech) == nil {
		return ScramUser{}, fmt.Errorf("--add-scram: mechanism %q; allowed SCRAM-SHA-256, SCRAM-SHA-512 (as MECHANISM=[name=NAME,password=PASSWORD])", mech)
	}
	if !ok || !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return ScramUser{}, fmt.Errorf("--add-scram %s: want %s=[name=NAME,password=PASSWORD]", mech, mech)
	}
	u := ScramUser{Mechanism: mech}
	for _, f := range strings.Split(v[1:len(v)-1], ",") {
		k, val, _ := strings.Cut(f, "=")
		switch strings.TrimSpace(k) {
		case "name":
			u.Name = strings.TrimSpace(val)
		case "password":
			u.password = val
		case "iterations", "salt", "saltedpassword":
			if k != "iterations" {
				return ScramUser{}, fmt.Errorf("--add-scram %s: %s is not supported; give password=", mech, k)
			}
		default:
			return ScramUser{}, fmt.Errorf("--add-scram %s: unknown field %q; allowed name, password", mech, strings.TrimSpace(k))
		}
	}
	if u.Name == "" || u.password == "" {
		return ScramUser{}, fmt.Errorf("--add-scram %s: want both name= and password=", mech)
	}
	return u, nil
}

// setSecurity applies one security setting; ok false: key is not one.
func (c *Config) setSecurity(key, value string) (ok bool, err error) {
	s := &c.Security
	v := strings.TrimSpace(value)
	switch key {
	case "listeners":
		ls, err := parseListeners(v)
		if err != nil {
			return true, err
		}
		s.Listeners = ls
	case "listener.security.protocol.map":
		m := map[string]string{}
		for _, kv := range splitCSV(v) {
			name, proto, ok := strings.Cut(kv, ":")
			if !ok || !isProtocol(proto) {
				return true, fmt.Errorf("%q: want NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", kv)
			}
			m[strings.ToUpper(name)] = proto
		}
		s.ProtocolMap = m
	case "security.inter.broker.protocol":
		if !isProtocol(v) {
			return true, fmt.Errorf("%q; allowed PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", v)
		}
		s.InterBrokerProtocol = v
	case "inter.broker.listener.name":
		s.InterBrokerListener = strings.ToUpper(v)
	case "ssl.keystore.location":
		s.KeystoreLocation = v
	case "ssl.truststore.location":
		s.TruststoreLocation = v
	case "ssl.keystore.type", "ssl.truststore.type":
		if !strings.EqualFold(v, "PEM") {
			return true, fmt.Errorf("%q: isrbench reads PEM stores only (convert a JKS or PKCS12 store with keytool and openssl)", v)
		}
	case "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password":
		// PEM stores here are unencrypted; an encrypted key is refused when read.
	case "ssl.client.auth":
		switch v {
		case "none", "requested", "required":
			s.ClientAuth = v
		default:
			return true, fmt.Errorf("%q; allowed none, requested, required", v)
		}
	case "ssl.endpoint.identification.algorithm":
		if v != "" && v != "https" {
			return true, fmt.Errorf("%q; allowed https or \"\" (no host name check)", v)
		}
		s.EndpointCheck, s.hostCheckSet = v, true
	case "sasl.enabled.mechanisms":
		var ms []string
		for _, m := range splitCSV(v) {
			if !slices.Contains(netfetch.SASLMechanisms, m) {
				return true, fmt.Errorf("%q; allowed %s (GSSAPI and OAUTHBEARER are not served)", m, strings.Join(netfetch.SASLMechanisms, ", "))
			}
			ms = append(ms, m)
		}
		s.EnabledMechanisms = ms
	case "sasl.mechanism.inter.broker.protocol":
		if !slices.Contains(netfetch.SASLMechanisms, v) {
			return true, fmt.Errorf("%q; allowed %s", v, strings.Join(netfetch.SASLMechanisms, ", "))
		}
		s.InterBrokerMechanism = v
	default:
		rest, ok := strings.CutPrefix(key, "listener.name.")
		if !ok || !strings.HasSuffix(rest, ".sasl.jaas.config") {
			return false, nil
		}
		lm := strings.ToLower(strings.TrimSuffix(rest, ".sasl.jaas.config"))
		if _, err := clientprops.ParseJAAS(value); err != nil {
			return true, err
		}
		if s.JAAS == nil {
			s.JAAS = map[string]string{}
		}
		s.JAAS[lm] = value
	}
	return true, nil
}

// securityKeys are the settings setSecurity takes, for help and errors.
var securityKeys = []string{"listeners", "listener.security.protocol.map", "security.inter.broker.protocol",
	"inter.broker.listener.name", "ssl.keystore.location", "ssl.keystore.type", "ssl.truststore.location",
	"ssl.truststore.type", "ssl.client.auth", "ssl.endpoint.identification.algorithm", "sasl.enabled.mechanisms",
	"sasl.mechanism.inter.broker.protocol", "listener.name.<listener>.<mechanism>.sasl.jaas.config"}

// securityHelp documents the security settings for serve --help.
func securityHelp() string {
	return "  listeners                                      NAME://host:port,... (broker i on port+i; 0 = ephemeral), default one PLAINTEXT listener on --host/--port\n" +
		"  listener.security.protocol.map                 NAME:PROTOCOL,... for listener names that are not protocols\n" +
		"  security.inter.broker.protocol                 PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL: the listener replication uses\n" +
		"  inter.broker.listener.name                     the listener replication uses, by name (not with security.inter.broker.protocol)\n" +
		"  ssl.keystore.location / ssl.keystore.type=PEM  the broker's key and certificate chain (serve --generate-tls DIR writes one)\n" +
		"  ssl.truststore.location / ssl.truststore.type=PEM  CA certificates for client certificates and the replica fetchers\n" +
		"  ssl.client.auth                                none (default) | requested | required\n" +
		"  ssl.endpoint.identification.algorithm          https (default) | \"\": the replica fetchers' host name check\n" +
		"  sasl.enabled.mechanisms                        PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 (default: all three)\n" +
		"  sasl.mechanism.inter.broker.protocol           the replica fetchers' mechanism (default the first enabled SCRAM)\n" +
		"  listener.name.<l>.<mech>.sasl.jaas.config      the brokers' credentials (default: a broker user made at start)\n"
}

func splitCSV(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func isProtocol(p string) bool {
	switch p {
	case netfetch.ProtocolPlaintext, netfetch.ProtocolSSL, netfetch.ProtocolSASLPlaintext, netfetch.ProtocolSASLSSL:
		return true
	}
	return false
}

// parseListeners reads NAME://host:port,... (host may be empty).
func parseListeners(v string) ([]ListenerConfig, error) {
	var out []ListenerConfig
	seen := map[string]bool{}
	for _, l := range splitCSV(v) {
		name, addr, ok := strings.Cut(l, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME://host:port (e.g. SASL_SSL://:9093)", l)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: %v; want NAME://host:port", l, err)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not in 0..65535", l, port)
		}
		name = strings.ToUpper(name)
		if seen[name] {
			return nil, fmt.Errorf("listener %s given twice", name)
		}
		seen[name] = true
		out = append(out, ListenerConfig{Name: name, Host: host, Port: n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener; want NAME://host:port,...")
	}
	return out, nil
}

// resolvedListener is a listener with its protocol and server-side security.
type resolvedListener struct {
	ListenerConfig
	protocol string
	sec      netfetch.Security
}

// clusterSecurity is SecurityConfig checked and loaded: the listeners (the inter-broker one
// first), the replica fetchers' security, the users to set at start, and every broker's
// port on every listener (Advertise).
type clusterSecurity struct {
	listeners []resolvedListener
	client    netfetch.ClientSecurity
	users     []controller.ScramUpsertion

	mu    sync.RWMutex
	ports map[string]map[int32]string // listener -> broker -> host:port
}

// resolveSecurity checks the security settings and loads the certificates; cfg.Host and
// BasePort give the default PLAINTEXT listener.
func resolveSecurity(cfg *Config) (*clusterSecurity, error) {
	s := &cfg.Security
	cs := &clusterSecurity{ports: map[string]map[int32]string{}}
	ls := s.Listeners
	if len(ls) == 0 {
		ls = []ListenerConfig{{Name: netfetch.ProtocolPlaintext, Host: cfg.Host, Port: cfg.BasePort}}
	}
	if s.InterBrokerListener != "" && s.InterBrokerProtocol != "" {
		return nil, fmt.Errorf("only one of inter.broker.listener.name and security.inter.broker.protocol should be set")
	}
	inter := s.InterBrokerListener
	if inter == "" {
		inter = s.InterBrokerProtocol
		if inter == "" {
			inter = netfetch.ProtocolPlaintext
		}
	}
	mechs := s.EnabledMechanisms
	if len(mechs) == 0 {
		mechs = []string{controller.ScramSHA512, controller.ScramSHA256, "PLAIN"}
	}
	var serverTLS *tls.Config
	interIdx := -1
	for i, l := range ls {
		if l.Host == "" {
			l.Host = cfg.Host
		}
		proto := l.Name
		if p, ok := s.ProtocolMap[l.Name]; ok {
			proto = p
		}
		if !isProtocol(proto) {
			return nil, fmt.Errorf("listener %s: not a security protocol and not in listener.security.protocol.map", l.Name)
		}
		rl := resolvedListener{ListenerConfig: l, protocol: proto, sec: netfetch.Security{Protocol: proto}}
		if rl.sec.IsTLS() {
			if serverTLS == nil {
				var err error
				if serverTLS, err = s.serverTLS(); err != nil {
					return nil, err
				}
			}
			rl.sec.TLS = serverTLS
		}
		if rl.sec.IsSASL() {
			rl.sec.Mechanisms = mechs
		}
		if err := rl.sec.Check(); err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		if l.Name == inter {
			interIdx = i
		}
		cs.listeners = append(cs.listeners, rl)
	}
	if interIdx < 0 {
		return nil, fmt.Errorf("the inter-broker listener %s is not in listeners (%s); set security.inter.broker.protocol or inter.broker.listener.name to one of them", inter, listenerNames(cs.listeners))
	}
	cs.listeners[0], cs.listeners[interIdx] = cs.listeners[interIdx], cs.listeners[0]
	if err := cs.interBrokerClient(s, mechs); err != nil {
		return nil, err
	}
	for _, u := range s.Users {
		up, err := upsertion(u.Mechanism, u.Name, u.password)
		if err != nil {
			return nil, err
		}
		cs.users = append(cs.users, up)
	}
	return cs, nil
}

func listenerNames(ls []resolvedListener) string {
	var n []string
	for _, l := range ls {
		n = append(n, l.Name)
	}
	return strings.Join(n, ", ")
}

// serverTLS loads the keystore (and the truststore for ssl.client.auth).
func (s *SecurityConfig) serverTLS() (*tls.Config, error) {
	if s.KeystoreLocation == "" {
		return nil, fmt.Errorf("a TLS listener needs ssl.keystore.location (a PEM file with the broker's key and certificate chain; serve --generate-tls DIR writes one)")
	}
	cert, err := clientprops.LoadKeyPair(s.KeystoreLocation, s.KeystoreLocation)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch s.ClientAuth {
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if s.TruststoreLocation != "" {
		if cfg.ClientCAs, err = clientprops.LoadCAs(s.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	} else if cfg.ClientAuth != tls.NoClientCert {
		return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location (the CAs client certificates are checked against)", s.ClientAuth)
	}
	return cfg, nil
}

// interBrokerUser is the broker user the cluster makes when no jaas config gives one.
const interBrokerUser = "isrbench-inter-broker"

// interBrokerClient builds the replica fetchers' security for the inter-broker listener,
// through clientprops as any client's.
func (cs *clusterSecurity) interBrokerClient(s *SecurityConfig, mechs []string) error {
	l := cs.listeners[0]
	p := clientprops.Props{{Key: "security.protocol", Value: l.protocol}}
	if l.sec.IsTLS() {
		if s.TruststoreLocation != "" {
			p = append(p, clientprops.Property{Key: "ssl.truststore.location", Value: s.TruststoreLocation})
		}
		if s.ClientAuth != "" && s.ClientAuth != "none" {
			p = append(p, clientprops.Property{Key: "ssl.keystore.location", Value: s.KeystoreLocation})
		}
		if s.hostCheckSet {
			p = append(p, clientprops.Property{Key: "ssl.endpoint.identification.algorithm", Value: s.EndpointCheck})
		}
	}
	if l.sec.IsSASL() {
		mech := s.InterBrokerMechanism
		if mech == "" {
			for _, m := range []string{controller.ScramSHA512, controller.ScramSHA256, "PLAIN"} {
				if slices.Contains(mechs, m) {
					mech = m
					break
				}
			}
		}
		if !slices.Contains(mechs, mech) {
			return fmt.Errorf("sasl.mechanism.inter.broker.protocol %s is not in sasl.enabled.mechanisms (%s)", mech, strings.Join(mechs, ","))
		}
		p = append(p, clientprops.Property{Key: "sasl.mechanism", Value: mech})
		if jaas, ok := s.JAAS[strings.ToLower(l.Name)+"."+strings.ToLower(mech)]; ok {
			p = append(p, clientprops.Property{Key: "sasl.jaas.config", Value: jaas})
		} else {
			var pw [24]byte
			rand.Read(pw[:])
			pass := base64.RawURLEncoding.EncodeToString(pw[:])
			p = append(p, clientprops.Property{Key: "sasl.username", Value: interBrokerUser}, clientprops.Property{Key: "sasl.password", Value: pass})
			storeMech := mech
			if mech == "PLAIN" {
				storeMech = controller.ScramSHA512 // PLAIN checks against a SCRAM credential
			}
			up, err := upsertion(storeMech, interBrokerUser, pass)
			if err != nil {
				return err
			}
			cs.users = append(cs.users, up)
		}
	}
	c, err := clientprops.New(p)
	if err != nil {
		return fmt.Errorf("inter-broker listener %s: %w", l.Name, err)
	}
	if cs.client.TLS, err = c.TLSConfig(); err != nil {
		return fmt.Errorf("inter-broker listener %s: %w", l.Name, err)
	}
	if cs.client.SASL, err = c.SASLMechanism(); err != nil {
		return fmt.Errorf("inter-broker listener %s: %w", l.Name, err)
	}
	return nil
}

// upsertion salts and hashes a password into a SCRAM credential change (4096 iterations).
func upsertion(mech, user, password string) (controller.ScramUpsertion, error) {
	h := controller.ScramHash(mech)
	if h == nil {
		return controller.ScramUpsertion{}, fmt.Errorf("SCRAM mechanism %q; allowed SCRAM-SHA-256, SCRAM-SHA-512", mech)
	}
	salt := make([]byte, 24)
	rand.Read(salt)
	sp, err := pbkdf2.Key(h, password, salt, controller.MinScramIterations, h().Size())
	if err != nil {
		return controller.ScramUpsertion{}, err
	}
	return controller.ScramUpsertion{User: user, Mechanism: mech, Iterations: controller.MinScramIterations, Salt: salt, SaltedPassword: sp}, nil
}

// addUsers sets the users of the security config in the metadata log.
func (cs *clusterSecurity) addUsers(ctrl *controller.Controller) error {
	if len(cs.users) == 0 {
		return nil
	}
	res, order, err := ctrl.AlterScramUsers(nil, cs.users)
	if err != nil {
		return fmt.Errorf("SCRAM users: %w", err)
	}
	for _, u := range order {
		if res[u] != nil {
			return fmt.Errorf("SCRAM user %s: %w", u, res[u])
		}
	}
	return nil
}

// Format prints the security settings with the jaas configs' values as [hidden], whatever
// the verb: a Config printed by mistake shows no password.
func (s SecurityConfig) Format(f fmt.State, _ rune) {
	jaas := make([]string, 0, len(s.JAAS))
	for k := range s.JAAS {
		jaas = append(jaas, k+"="+clientprops.Hidden)
	}
	slices.Sort(jaas)
	fmt.Fprintf(f, "{listeners %v inter-broker %q/%q keystore %q truststore %q client.auth %q mechanisms %v jaas %v users %v}",
		s.Listeners, s.InterBrokerListener, s.InterBrokerProtocol, s.KeystoreLocation, s.TruststoreLocation, s.ClientAuth, s.EnabledMechanisms, jaas, s.Users)
}
