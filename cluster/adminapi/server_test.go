package adminapi

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/isrbench/isrbench/cluster"
	"github.com/isrbench/isrbench/cluster/clustertest"
	"github.com/isrbench/isrbench/core/controller"
)

// startAdmin serves c's admin API on an ephemeral port and returns its base URL.
func startAdmin(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	return startAdminWith(t, c, Config{}, "127.0.0.1:0")
}

// startAdminWith serves c's admin API with cfg on addr and returns its base URL.
func startAdminWith(t testing.TB, c *cluster.Cluster, cfg Config, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := New(c, cfg)
	served := make(chan error, 1)
	go func() { served <- a.Serve(ln) }()
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("admin close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("admin serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// httpDo sends a request as `isrbench broker` does (with X-Isrbench: 1 on a POST).
func httpDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	h := map[string]string{}
	if method == "POST" {
		h[Header] = "1"
	}
	return httpDoWith(t, method, url, h)
}

// httpDoWith sends a request with headers (a "Host" entry replaces the URL's host).
func httpDoWith(t testing.TB, method, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	cl := &http.Client{Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestAdminStopStartBroker is the articles' experiment through the admin API: stopping the
// leader of a partition moves leadership to an ISR member and removes it from the ISR, the
// metrics show it, and starting it again brings it back as a running broker.
func TestAdminStopStartBroker(t *testing.T) {
	c := clustertest.Start(t, 3, nil)
	st, _ := clustertest.FollowedTopic(t, c, "adm")
	base := startAdmin(t, c)

	code, body := httpDo(t, "GET", base+"/brokers")
	var bs []cluster.BrokerStatus
	if err := json.Unmarshal([]byte(body), &bs); code != 200 || err != nil || len(bs) != 3 {
		t.Fatalf("GET /brokers: %d %v %s", code, err, body)
	}
	for _, b := range bs {
		if b.State != "running" || b.Fenced || b.Addr != c.Addr(b.ID) {
			t.Errorf("broker %+v, want running and unfenced", b)
		}
	}
	if !slices.Contains(bs[st.Leader].Leads, "adm-0") {
		t.Errorf("broker %d leads %v, want adm-0", st.Leader, bs[st.Leader].Leads)
	}

	code, body = httpDo(t, "POST", base+"/brokers/"+itoa(st.Leader)+"/stop")
	var got cluster.BrokerStatus
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got.State != "stopped" || !got.Fenced || len(got.Leads) != 0 {
		t.Fatalf("POST stop: %d %v %s", code, err, body)
	}
	now, _ := c.Controller().Partition("adm", 0)
	if now.Leader == st.Leader || now.Leader == controller.NoLeader || slices.Contains(now.ISR, st.Leader) || now.LeaderEpoch <= st.LeaderEpoch {
		t.Errorf("after stopping leader %d: %+v, want an ISR member elected and %d out of the ISR", st.Leader, now, st.Leader)
	}
	_, metrics := httpDo(t, "GET", base+"/metrics")
	for _, want := range []string{
		`isrbench_broker_up{broker="` + itoa(st.Leader) + `"} 0`,
		"kafka_controller_kafkacontroller_fencedbrokercount 1",
		"kafka_controller_kafkacontroller_activebrokercount 2",
		"# TYPE kafka_server_replicamanager_isrshrinks_total counter",
		`kafka_cluster_partition_insyncreplicascount{broker="` + itoa(now.Leader) + `",topic="adm",partition="0"} 2`,
		`kafka_log_log_logendoffset{broker="` + itoa(now.Leader) + `",topic="adm",partition="0"} 0`,
		"# TYPE kafka_network_requestmetrics_requests_total counter", // declared before the first request
		`kafka_server_socket_server_metrics_connection_count{broker="` + itoa(now.Leader) + `"}`,
		"# TYPE isrbench_connections_refused_total counter",
		`isrbench_log_damaged_batches_total{broker="` + itoa(now.Leader) + `"} 0`,
		"# TYPE isrbench_log_scrub_bytes_total counter",
		`kafka_network_socketserver_memorypoolavailable{broker="` + itoa(now.Leader) + `"} 1.048576e+08`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}

	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"POST", "/brokers/" + itoa(st.Leader) + "/stop", 409, "already stopped"},
		{"POST", "/brokers/" + itoa(st.Leader) + "/pause", 409, "not running"},
		{"POST", "/brokers/9/stop", 404, "no broker 9"},
		{"POST", "/brokers/x/stop", 400, "not an integer"},
		{"POST", "/brokers/0/jump", 400, `unknown action "jump"`},
		{"GET", "/brokers/0/stop", 405, "use POST"},
		{"POST", "/metrics", 405, "use GET"},
		{"GET", "/nope", 404, "GET /brokers"},
	} {
		code, body := httpDo(t, tc.method, base+tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %q, want %d and %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}

	code, body = httpDo(t, "POST", base+"/brokers/"+itoa(st.Leader)+"/start")
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got.State != "running" || got.Fenced {
		t.Fatalf("POST start: %d %v %s", code, err, body)
	}
	if code, body := httpDo(t, "POST", base+"/brokers/"+itoa(st.Leader)+"/start"); code != 409 || !strings.Contains(body, "not stopped") {
		t.Errorf("start of a running broker: %d %s", code, body)
	}
}

// TestAdminPauseKill: pause and kill leave the broker registered (unfenced) until its
// session expires; resume brings a paused broker back.
func TestAdminPauseKill(t *testing.T) {
	c := clustertest.Start(t, 3, func(cfg *cluster.Config) { cfg.Controller.BrokerSessionTimeoutMs = 60_000 })
	base := startAdmin(t, c)
	if err := c.CreateTopic("pk", 3, 3, nil); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		broker int32
		action string
		state  string
		fenced bool
	}{
		{1, "pause", "paused", false}, // unfenced: its session has not expired
		{2, "kill", "stopped", false},
		{2, "start", "running", false},
		{2, "stop", "stopped", true}, // fenced at once, while broker 1 is paused
		{1, "resume", "running", false},
		{2, "start", "running", false},
		{0, "crash", "stopped", false},
	} {
		code, body := httpDo(t, "POST", base+"/brokers/"+itoa(step.broker)+"/"+step.action)
		var got cluster.BrokerStatus
		if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got.State != step.state || got.Fenced != step.fenced {
			t.Fatalf("%s broker %d: %d %v %s, want %s, fenced %v", step.action, step.broker, code, err, body, step.state, step.fenced)
		}
		// The metrics stay readable whatever the brokers' states (a paused broker included).
		up := map[string]string{"running": "1", "paused": "0", "stopped": "0"}[step.state]
		if code, m := httpDo(t, "GET", base+"/metrics"); code != 200 || !strings.Contains(m, `isrbench_broker_up{broker="`+itoa(step.broker)+`"} `+up) {
			t.Fatalf("after %s broker %d: metrics %d:\n%s", step.action, step.broker, code, m)
		}
	}
}

func itoa(id int32) string { return strconv.Itoa(int(id)) }
