package netfetch_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/internal/certs"
	"github.com/isrbench/isrbench/internal/clientprops"
	"github.com/isrbench/isrbench/internal/kafkatest"
)

const benchPassword = "bench-Secret-9"

// securedCluster starts 3 brokers with the given listeners settings (TLS material from
// certs.Write, SCRAM user bench), and returns the cluster and the TLS files.
func securedCluster(t *testing.T, sets ...string) (*cluster.Cluster, certs.Files) {
	t.Helper()
	files, err := certs.Write(filepath.Join(t.TempDir(), "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) {
		for _, kv := range append([]string{"ssl.keystore.location=" + files.BrokerKeystore, "ssl.truststore.location=" + files.CA}, sets...) {
			if err := cfg.SetKV(kv); err != nil {
				t.Fatal(err)
			}
		}
		u, err := cluster.ParseAddScram("SCRAM-SHA-512=[name=bench,password=" + benchPassword + "]")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Security.Users = append(cfg.Security.Users, u)
	})
	return c, files
}

func listenerAddrs(t *testing.T, c *cluster.Cluster, name string) []string {
	t.Helper()
	for _, l := range c.Listeners() {
		if l.Name == name {
			return strings.Split(l.Bootstrap, ",")
		}
	}
	t.Fatalf("no listener %s in %v", name, c.Listeners())
	return nil
}

func clientConfig(t *testing.T, kv ...string) *clientprops.Config {
	t.Helper()
	var p clientprops.Props
	for i := 0; i+1 < len(kv); i += 2 {
		p = append(p, clientprops.Property{Key: kv[i], Value: kv[i+1]})
	}
	c, err := clientprops.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func scramClient(t *testing.T, files certs.Files, proto, password string) *clientprops.Config {
	kv := []string{"security.protocol", proto, "sasl.mechanism", "SCRAM-SHA-512", "sasl.username", "bench", "sasl.password", password}
	if strings.HasSuffix(proto, "SSL") {
		kv = append(kv, "ssl.truststore.location", files.CA)
	}
	return clientConfig(t, kv...)
}

func securedClient(t *testing.T, addrs []string, sec *clientprops.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	so, err := sec.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.MetadataMinAge(10 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}, so...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSASLSSLCluster: one SASL_SSL listener for clients and replication (SCRAM-SHA-512 for
// both): acks=all produce and consume work, every fetch response went through the copy path
// (zero-copy bytes 0, TLS copy bytes counted), and refused clients get the causes.
func TestSASLSSLCluster(t *testing.T) {
	c, files := securedCluster(t, "listeners=SASL_SSL://127.0.0.1:0", "security.inter.broker.protocol=SASL_SSL")
	addrs := listenerAddrs(t, c, "SASL_SSL")
	ctx := clustertest.Context(t)
	good := scramClient(t, files, "SASL_SSL", benchPassword)
	if err := clientprops.Check(ctx, addrs, good); err != nil {
		t.Fatal(err)
	}
	cl := securedClient(t, addrs, good)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "sec"); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "full ISRs", func() bool {
		md, err := adm.Metadata(ctx, "sec")
		if err != nil || md.Topics["sec"].Err != nil {
			return false
		}
		for _, p := range md.Topics["sec"].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	clustertest.Produce(t, cl, "sec", "v", 200)
	cons := securedClient(t, addrs, good, kgo.ConsumeTopics("sec"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 200 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	st := c.Stats()
	if st.SendfileBytes != 0 || st.TLSCopyBytes == 0 {
		t.Fatalf("under TLS: sendfile bytes %d (want 0), TLS copy bytes %d (want > 0)", st.SendfileBytes, st.TLSCopyBytes)
	}

	for _, tc := range []struct {
		name string
		sec  *clientprops.Config
		want string
	}{
		{"wrong password", scramClient(t, files, "SASL_SSL", "nope-"+benchPassword), "SASL_AUTHENTICATION_FAILED"},
		{"plaintext", clientConfig(t), "the server answered with TLS"},
		{"SASL without TLS", scramClient(t, files, "SASL_PLAINTEXT", benchPassword), "the server answered with TLS"},
		{"untrusted", clientConfig(t, "security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512", "sasl.username", "bench", "sasl.password", benchPassword), "x509: certificate signed by unknown authority"},
		{"TLS without SASL", clientConfig(t, "security.protocol", "SSL", "ssl.ca.location", files.CA), "requires SASL"},
		{"mechanism not enabled", clientConfig(t, "security.protocol", "SASL_SSL", "ssl.ca.location", files.CA, "sasl.mechanism", "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url", "file://"+tokenFile(t)), "UNSUPPORTED_SASL_MECHANISM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := clientprops.Check(ctx, addrs, tc.sec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), benchPassword) {
				t.Fatalf("the error shows the password")
			}
		})
	}
	err := clientprops.Check(ctx, addrs, scramClient(t, files, "SASL_SSL", "bad"))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid credentials with SASL mechanism SCRAM-SHA-512") {
		t.Fatalf("wrong password: %v, want the broker's SASL_AUTHENTICATION_FAILED message", err)
	}
}

// TestListenersAdvertiseAndZeroCopy: replication over a PLAINTEXT inter-broker listener
// stays zero-copy while clients use SASL_SSL; Metadata on each listener names that
// listener's ports; users, ACLs and SCRAM admin over the secured listener.
func TestListenersAdvertiseAndZeroCopy(t *testing.T) {
	c, files := securedCluster(t, "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "security.inter.broker.protocol=PLAINTEXT",
		"isrbench.zero.copy.min.bytes=0")
	ctx := clustertest.Context(t)
	plainAddrs, secAddrs := listenerAddrs(t, c, "PLAINTEXT"), listenerAddrs(t, c, "SASL_SSL")
	if strings.Join(plainAddrs, ",") != c.Bootstrap() {
		t.Fatalf("Bootstrap %s, want the inter-broker listener's %v", c.Bootstrap(), plainAddrs)
	}
	cl := securedClient(t, secAddrs, scramClient(t, files, "SASL_SSL", benchPassword))
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if got := net.JoinHostPort(b.Host, itoa(b.Port)); !contains(secAddrs, got) {
			t.Fatalf("Metadata on SASL_SSL names broker %d at %s, want one of %v", b.NodeID, got, secAddrs)
		}
	}
	if err := c.CreateTopic("z", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.Produce(t, cl, "z", strings.Repeat("x", 2000), 100)
	kafkatest.WaitFor(t, 10*time.Second, "replicated with sendfile", func() bool { return c.Stats().SendfileBytes > 0 })

	// ACLs: no authorizer.
	acls := request[*kmsg.DescribeACLsResponse](t, cl, kmsg.NewPtrDescribeACLsRequest())
	if acls.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls: error code %d, want SECURITY_DISABLED", acls.ErrorCode)
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Creations = append(cr.Creations, kmsg.NewCreateACLsRequestCreation())
	if r := request[*kmsg.CreateACLsResponse](t, cl, cr); len(r.Results) != 1 || r.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls: %+v", r.Results)
	}
	// A SCRAM user added over the wire logs in with SCRAM and with PLAIN.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "alice-pw-1"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || len(ds["alice"].CredInfos) != 1 || ds["alice"].CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe alice: %+v, %v", ds, err)
	}
	for _, mech := range []string{"SCRAM-SHA-256", "PLAIN"} {
		alice := clientConfig(t, "security.protocol", "SASL_SSL", "ssl.ca.location", files.CA, "sasl.mechanism", mech, "sasl.username", "alice", "sasl.password", "alice-pw-1")
		if err := clientprops.Check(ctx, secAddrs, alice); err != nil {
			t.Fatalf("alice with %s: %v", mech, err)
		}
	}
	alice512 := clientConfig(t, "security.protocol", "SASL_SSL", "ssl.ca.location", files.CA, "sasl.mechanism", "SCRAM-SHA-512", "sasl.username", "alice", "sasl.password", "alice-pw-1")
	if err := clientprops.Check(ctx, secAddrs, alice512); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("alice has no SCRAM-SHA-512 credential: %v", err)
	}
	// The users are in the metadata log: a restart of the whole cluster keeps them.
	if rs, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "nobody", Mechanism: kadm.ScramSha256}}, nil); err != nil || !errors.Is(rs["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete a missing credential: %+v %v", rs, err)
	}
}

// TestSASLHandshakeWire: the SASL state machine on the wire: before authentication only
// ApiVersions, SaslHandshake and SaslAuthenticate; a v0 handshake's bare tokens; an
// unknown mechanism; an authenticate without a handshake.
func TestSASLHandshakeWire(t *testing.T) {
	c, _ := securedCluster(t, "listeners=SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512")
	addr := listenerAddrs(t, c, "SASL_PLAINTEXT")[0]

	t.Run("metadata before authentication closes", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(3)
		av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
		r.RoundTrip(av, kmsg.NewPtrApiVersionsResponse())
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(9)
		r.Send(md)
		r.ExpectClosed()
	})
	t.Run("unknown mechanism", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "SCRAM-SHA-256"
		resp := kmsg.NewPtrSASLHandshakeResponse()
		r.RoundTrip(hs, resp)
		if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-512" {
			t.Fatalf("handshake %+v", resp)
		}
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SetVersion(1)
		a.SASLAuthBytes = []byte("\x00bench\x00" + benchPassword)
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		r.RoundTrip(a, resp)
		if resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("authenticate %+v", resp)
		}
		r.ExpectClosed()
	})
	t.Run("v0 handshake, bare PLAIN token", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(0)
		hs.Mechanism = "PLAIN"
		resp := kmsg.NewPtrSASLHandshakeResponse()
		r.RoundTrip(hs, resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("handshake %+v", resp)
		}
		tok := []byte("\x00bench\x00" + benchPassword)
		r.Conn.Write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
		var sz [4]byte
		if _, err := r.R.Read(sz[:]); err != nil || sz != [4]byte{} {
			t.Fatalf("bare token answer %v %v, want an empty frame", sz, err)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(9)
		r.RoundTrip(md, kmsg.NewPtrMetadataResponse())
	})
	t.Run("v0 handshake, wrong password closes", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "PLAIN"
		r.RoundTrip(hs, kmsg.NewPtrSASLHandshakeResponse())
		tok := []byte("\x00bench\x00wrong")
		r.Conn.Write(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
		r.ExpectClosed()
	})
	t.Run("second handshake after authentication", func(t *testing.T) {
		r := kafkatest.Dial(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.SetVersion(1)
		hs.Mechanism = "PLAIN"
		r.RoundTrip(hs, kmsg.NewPtrSASLHandshakeResponse())
		a := kmsg.NewPtrSASLAuthenticateRequest()
		a.SetVersion(1)
		a.SASLAuthBytes = []byte("\x00bench\x00" + benchPassword)
		ar := kmsg.NewPtrSASLAuthenticateResponse()
		r.RoundTrip(a, ar)
		if ar.ErrorCode != 0 {
			t.Fatalf("authenticate %+v", ar)
		}
		resp := kmsg.NewPtrSASLHandshakeResponse()
		r.RoundTrip(hs, resp)
		if resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("second handshake %+v", resp)
		}
	})
}

// TestMutualTLS: ssl.client.auth=required refuses a client without a certificate; the
// replica fetchers present the broker certificate.
func TestMutualTLS(t *testing.T) {
	c, files := securedCluster(t, "listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL", "ssl.client.auth=required")
	addrs := listenerAddrs(t, c, "SSL")
	ctx := clustertest.Context(t)
	err := clientprops.Check(ctx, addrs, clientConfig(t, "security.protocol", "SSL", "ssl.ca.location", files.CA))
	if err == nil || !strings.Contains(err.Error(), "refused the client certificate") {
		t.Fatalf("no client certificate: %v", err)
	}
	sec := clientConfig(t, "security.protocol", "SSL", "ssl.ca.location", files.CA, "ssl.keystore.location", files.ClientKeystore)
	cl := securedClient(t, addrs, sec)
	if err := c.CreateTopic("m", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	clustertest.Produce(t, cl, "m", "v", 20)
	adm := kadm.NewClient(cl)
	kafkatest.WaitFor(t, 10*time.Second, "full ISR over mTLS", func() bool {
		md, err := adm.Metadata(ctx, "m")
		return err == nil && len(md.Topics["m"].Partitions[0].ISR) == 3
	})
}

// TestSecurityConfigRefused: each incomplete security setting is refused at Start, naming it.
func TestSecurityConfigRefused(t *testing.T) {
	files, err := certs.Write(filepath.Join(t.TempDir(), "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "ks.jks")
	os.WriteFile(notPEM, []byte{0xfe, 0xed, 0xfe, 0xed}, 0o600)
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"listeners=SSL://:0"}, "needs ssl.keystore.location"},
		{[]string{"listeners=SSL://:0", "ssl.keystore.location=" + notPEM}, "no PEM CERTIFICATE block"},
		{[]string{"listeners=SASL_SSL://:0", "ssl.keystore.location=" + files.BrokerKeystore}, "the inter-broker listener PLAINTEXT is not in listeners (SASL_SSL)"},
		{[]string{"listeners=SSL://:0", "security.inter.broker.protocol=SSL", "inter.broker.listener.name=SSL"}, "only one of inter.broker.listener.name and security.inter.broker.protocol"},
		{[]string{"listeners=INTERNAL://:0", "inter.broker.listener.name=INTERNAL"}, "not a security protocol and not in listener.security.protocol.map"},
		{[]string{"listeners=SSL://:0", "ssl.keystore.location=" + files.BrokerKeystore, "security.inter.broker.protocol=SSL", "ssl.client.auth=required", "ssl.truststore.location="}, "needs ssl.truststore.location"},
		{[]string{"listeners=SASL_PLAINTEXT://:0", "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256"}, "is not in sasl.enabled.mechanisms"},
	} {
		cfg := cluster.DefaultConfig()
		var serr error
		for _, kv := range tc.sets {
			if serr = cfg.SetKV(kv); serr != nil {
				break
			}
		}
		if serr == nil {
			serr = cfg.Check()
		}
		if serr == nil || !strings.Contains(serr.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.sets, serr, tc.want)
		}
	}
	cfg := cluster.DefaultConfig()
	for _, kv := range []string{"ssl.client.auth=sometimes", "sasl.enabled.mechanisms=GSSAPI", "ssl.keystore.type=JKS", "listeners=PLAINTEXT:9092", "security.inter.broker.protocol=TLS", "listener.name.sasl_ssl.plain.sasl.jaas.config=nonsense"} {
		if err := cfg.SetKV(kv); err == nil {
			t.Errorf("%s accepted", kv)
		}
	}
}

func tokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("eyJhbGciOiJub25lIn0.eyJzdWIiOiJiZW5jaCJ9."), 0o600)
	return p
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func contains(s []string, v string) bool { return slices.Contains(s, v) }

// TestSecurityConfigPrintsNoPassword: a cluster config printed by mistake shows no password.
func TestSecurityConfigPrintsNoPassword(t *testing.T) {
	cfg := cluster.DefaultConfig()
	if err := cfg.SetKV(`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="` + benchPassword + `";`); err != nil {
		t.Fatal(err)
	}
	u, err := cluster.ParseAddScram("SCRAM-SHA-512=[name=bench,password=" + benchPassword + "]")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Security.Users = append(cfg.Security.Users, u)
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg.Security)} {
		if strings.Contains(s, benchPassword) {
			t.Fatalf("printed config shows the password: %s", s)
		}
	}
}
