package adminapi

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/isrbench/isrbench/cluster"
)

// The admin HTTP server of an embedded cluster (`isrbench serve --admin`): the hands-on
// experiments of stopping, killing, pausing and restarting one broker of a running cluster
// while Kafka tools watch it, and the brokers' metrics under the names of Kafka's JMX MBeans
// in the Prometheus text format.
//
//	GET  /brokers                  JSON: every broker's id, address, state, fenced flag
//	                               and the partitions it leads
//	GET  /metrics                  Prometheus text: ReplicaManager, ReplicaFetcherManager,
//	                               Log, KafkaController and wire-server figures
//	POST /brokers/<id>/<action>    stop | kill | crash | pause | resume | start
//	                               (with the header "X-Isrbench: 1")
//	GET  /links                    JSON: the replica links with a fault (links.go)
//	POST /links/<id>/<action>      slow?latency=D&jitter=D&bandwidth=N | down | heal: every
//	                               replica link between broker id and the others
//
// Every request is checked first (guard.go): its Host must be an address of the
// listener, a POST must come from no foreign Origin and carry X-Isrbench: 1 (or a JSON
// Content-Type), and with a token configured every request needs it as a bearer token.
//
// Actions (each answers the broker's new state as JSON, or an error text with 404 for an
// unknown broker, 400 for an unknown action, 409 when the broker's state does not allow it):
//
//	stop    a controlled stop (docker stop): the broker stops at once and the controller
//	        fences it immediately, moving its leaderships to ISR members
//	kill    kill -9: the broker stops at once; the controller fences it only when its
//	        session expires (broker.session.timeout.ms)
//	crash   kill -9 plus a power loss: every log drops what was not fsynced, then as kill
//	pause   SIGSTOP: no fetch, no heartbeat, no answer; connections stay open
//	resume  SIGCONT after pause
//	start   start a stopped broker again from its data dir (log recovery, rejoin)

// Config configures the admin HTTP server.
type Config struct {
	// Token, when not empty, is required on every request as "Authorization: Bearer
	// <Token>" (see ReadToken for `--admin-token-file`).
	Token string
}

// Server is the admin HTTP server of a cluster. Serve, Close and the handlers may run
// concurrently.
type Server struct {
	c        *cluster.Cluster
	srv      *fasthttp.Server
	tokenSum []byte                  // SHA-256 of the token; nil = no token
	hosts    atomic.Pointer[hostSet] // the Host values allowed, set by Serve

	// mu orders Serve and Close: a Close before Serve took its listener closes the
	// listener when Serve gets it (fasthttp's Shutdown only stops listeners it has).
	mu struct {
		sync.Mutex
		closed bool
		ln     net.Listener
	}
}

// New returns the admin server of c; Serve starts it.
func New(c *cluster.Cluster, cfg Config) *Server {
	a := &Server{c: c}
	if cfg.Token != "" {
		sum := sha256.Sum256([]byte(cfg.Token))
		a.tokenSum = sum[:]
	}
	a.hosts.Store(&hostSet{})
	a.srv = &fasthttp.Server{
		Handler:            a.handle,
		Name:               "isrbench-admin",
		ReadTimeout:        10 * time.Second,
		WriteTimeout:       30 * time.Second,
		IdleTimeout:        time.Minute,
		ReadBufferSize:     4096, // request line and headers; larger ones get 431
		MaxRequestBodySize: 1 << 10,
		Concurrency:        256, // connections served at once; more are answered 503
		NoDefaultDate:      true,
		Logger:             discardLogger{},
	}
	return a
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// Serve answers on ln until Close; it returns nil after Close. Requests must name ln's
// address in their Host header (see guard.go).
func (a *Server) Serve(ln net.Listener) error {
	hs := hostsFor(ln.Addr())
	a.hosts.Store(&hs)
	a.mu.Lock()
	if a.mu.closed {
		a.mu.Unlock()
		ln.Close()
		return nil
	}
	a.mu.ln = ln
	a.mu.Unlock()
	err := a.srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops accepting and closes open connections once their requests are answered.
func (a *Server) Close() error {
	a.mu.Lock()
	a.mu.closed = true
	ln := a.mu.ln
	a.mu.Unlock()
	err := a.srv.Shutdown()
	if ln != nil {
		ln.Close() // Serve returns although Shutdown ran before it had the listener
	}
	return err
}

func (a *Server) handle(ctx *fasthttp.RequestCtx) {
	if err := a.guard(ctx); err != nil {
		refuse(ctx, err)
		return
	}
	path := strings.Trim(string(ctx.Path()), "/")
	parts := strings.Split(path, "/")
	switch {
	case path == "metrics":
		if !allow(ctx, fasthttp.MethodGet) {
			return
		}
		ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
		a.writeMetrics(ctx)
	case path == "brokers" || path == "links":
		if !allow(ctx, fasthttp.MethodGet) {
			return
		}
		if path == "brokers" {
			writeJSON(ctx, fasthttp.StatusOK, a.c.Statuses())
		} else {
			writeJSON(ctx, fasthttp.StatusOK, a.c.Links())
		}
	case len(parts) == 3 && (parts[0] == "brokers" || parts[0] == "links"):
		if !allow(ctx, fasthttp.MethodPost) {
			return
		}
		if parts[0] == "brokers" {
			a.handleBroker(ctx, parts[1], parts[2])
		} else {
			a.handleLink(ctx, parts[1], parts[2])
		}
	default:
		ctx.Error(fmt.Sprintf("no such endpoint %q: GET /brokers, GET /metrics, GET /links, POST /brokers/<id>/{%s}, POST /links/<id>/{%s}\n",
			"/"+path, strings.Join(cluster.Actions, ","), strings.Join(LinkActions, ",")), fasthttp.StatusNotFound)
	}
}

// handleBroker applies POST /brokers/<id>/<action> and answers the broker's new state.
func (a *Server) handleBroker(ctx *fasthttp.RequestCtx, idText, action string) {
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil {
		ctx.Error(fmt.Sprintf("broker id %q: not an integer\n", idText), fasthttp.StatusBadRequest)
		return
	}
	if err := a.c.Act(int32(id), action); err != nil {
		code := fasthttp.StatusConflict
		switch {
		case errors.Is(err, cluster.ErrUnknownBroker):
			code = fasthttp.StatusNotFound
		case errors.Is(err, cluster.ErrUnknownAction):
			code = fasthttp.StatusBadRequest
		}
		ctx.Error(err.Error()+"\n", code)
		return
	}
	for _, s := range a.c.Statuses() {
		if s.ID == int32(id) {
			writeJSON(ctx, fasthttp.StatusOK, s)
		}
	}
}

// handleLink applies POST /links/<id>/<action> (see links.go).
func (a *Server) handleLink(ctx *fasthttp.RequestCtx, idText, action string) {
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil {
		ctx.Error(fmt.Sprintf("broker id %q: not an integer\n", idText), fasthttp.StatusBadRequest)
		return
	}
	args := ctx.QueryArgs()
	var names []string
	for k := range args.All() {
		names = append(names, string(k))
	}
	f, err := ParseLinkFault(action, names, func(n string) string { return string(args.Peek(n)) })
	if err == nil {
		err = a.c.SetBrokerLinks(int32(id), f)
	}
	if err != nil {
		code := fasthttp.StatusBadRequest
		if errors.Is(err, cluster.ErrUnknownBroker) {
			code = fasthttp.StatusNotFound
		}
		ctx.Error(err.Error()+"\n", code)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, a.c.Links())
}

// allow answers 405 with an Allow header unless the request uses method.
func allow(ctx *fasthttp.RequestCtx, method string) bool {
	if string(ctx.Method()) == method {
		return true
	}
	ctx.Response.Header.Set("Allow", method)
	ctx.Error(fmt.Sprintf("%s %s: use %s\n", ctx.Method(), ctx.Path(), method), fasthttp.StatusMethodNotAllowed)
	return false
}

func writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	ctx.SetContentType("application/json")
	ctx.SetStatusCode(code)
	enc := json.NewEncoder(ctx)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		ctx.Error(err.Error(), fasthttp.StatusInternalServerError)
	}
}

// writeMetrics writes the Prometheus text exposition: per running broker its
// ReplicaManager gauges and counters, its replica fetchers' MaxLag, per hosted partition
// replica the Log LEO / log start and (on the leader) the HW and ISR size; the controller's
// gauges and counters; the wire servers' counters.
func (a *Server) writeMetrics(w io.Writer) {
	type sample struct {
		labels string
		v      float64
	}
	fams := map[string][]sample{}
	var order []string
	help := map[string]string{}
	add := func(name, typ, h, labels string, v float64) {
		if _, ok := help[name]; !ok {
			help[name] = "# HELP " + name + " " + h + "\n# TYPE " + name + " " + typ + "\n"
			order = append(order, name)
		}
		fams[name] = append(fams[name], sample{labels, v})
	}
	for _, s := range a.c.Statuses() {
		bl := fmt.Sprintf(`broker="%d"`, s.ID)
		up := 0.0
		if s.State == "running" {
			up = 1
		}
		add("isrbench_broker_up", "gauge", "1 if the broker is running (not stopped or paused).", bl, up)
		b := a.c.Broker(s.ID)
		if b == nil || s.State == "stopped" {
			continue
		}
		m := b.Metrics()
		add("kafka_server_replicamanager_isrshrinks_total", "counter", "ISR shrinks by this broker as leader (kafka.server:type=ReplicaManager,name=IsrShrinksPerSec).", bl, float64(m.IsrShrinks))
		add("kafka_server_replicamanager_isrexpands_total", "counter", "ISR expands by this broker as leader (IsrExpandsPerSec).", bl, float64(m.IsrExpands))
		add("kafka_server_replicamanager_underreplicatedpartitions", "gauge", "Led partitions whose ISR is smaller than the replica set (UnderReplicatedPartitions).", bl, float64(m.UnderReplicatedPartitions))
		add("kafka_server_replicamanager_underminisrpartitioncount", "gauge", "Led partitions whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).", bl, float64(m.UnderMinIsrPartitionCount))
		add("kafka_server_replicamanager_atminisrpartitioncount", "gauge", "Led partitions whose ISR is exactly min.insync.replicas (AtMinIsrPartitionCount).", bl, float64(m.AtMinIsrPartitionCount))
		add("kafka_server_replicamanager_leadercount", "gauge", "Partitions led (LeaderCount).", bl, float64(m.LeaderCount))
		add("kafka_server_replicamanager_partitioncount", "gauge", "Partition replicas hosted (PartitionCount).", bl, float64(m.PartitionCount))
		ds := b.DamageStats()
		add("isrbench_log_damaged_batches_total", "counter", "Batches found failing their CRC in this broker's replicas (by reads and the scrub); each damaged replica is taken out of leadership and the ISR and healed.", bl, float64(ds.Found))
		add("isrbench_log_damaged_replicas_truncated_total", "counter", "Damaged replicas truncated below their damage to re-replicate from the leader.", bl, float64(ds.Truncated))
		add("isrbench_replica_fetch_corrupt_batches_total", "counter", "Fetched batches failing their CRC that this broker as a follower refused to append.", bl, float64(ds.FetchedCorrupt))
		add("isrbench_log_scrub_bytes_total", "counter", "Bytes of sealed segments the background scrub checked (isrbench.log.scrub.*).", bl, float64(ds.ScrubbedBytes))
		add("kafka_server_replicafetchermanager_maxlag", "gauge", "Max over led partitions of leader LEO - follower LEO, in records (ReplicaFetcherManager MaxLag).", bl, float64(m.MaxLag))
		for _, p := range b.Partitions() {
			pl := fmt.Sprintf(`broker="%d",topic=%q,partition="%d"`, s.ID, p.Topic, p.Partition)
			add("kafka_log_log_logendoffset", "gauge", "The replica's LEO, the next offset to write (kafka.log:type=Log,name=LogEndOffset).", pl, float64(p.LEO))
			add("kafka_log_log_logstartoffset", "gauge", "The replica's log start offset (LogStartOffset).", pl, float64(p.LogStart))
			add("isrbench_partition_high_watermark", "gauge", "The replica's HW: the first offset consumers cannot read.", pl, float64(p.HW))
			if p.IsLeader {
				add("kafka_cluster_partition_insyncreplicascount", "gauge", "ISR size of a led partition (kafka.cluster:type=Partition,name=InSyncReplicasCount).", pl, float64(len(p.ISR)))
				add("isrbench_partition_leader_epoch", "gauge", "Leader epoch of a led partition.", pl, float64(p.LeaderEpoch))
			}
		}
	}
	for _, id := range a.c.BrokerIDs() {
		srv := a.c.Server(id)
		if srv == nil {
			continue
		}
		st := srv.ConnStats()
		bl := fmt.Sprintf(`broker="%d"`, id)
		add("kafka_server_socket_server_metrics_connection_count", "gauge", "Client connections open (socket-server-metrics connection-count).", bl, float64(st.Open))
		add("isrbench_connections_limit", "gauge", "Connections the broker accepts at once: min(max.connections, its share of RLIMIT_NOFILE).", bl, float64(st.Limit))
		add("isrbench_connections_refused_total", "counter", "Connections closed as soon as accepted: over max.connections, max.connections.per.ip or the file-descriptor share.", bl, float64(st.Refused))
		add("isrbench_connections_idle_closed_total", "counter", "Connections closed after connections.max.idle.ms without a request.", bl, float64(st.IdleClosed))
		add("isrbench_connections_read_timeouts_total", "counter", "Connections closed because a request did not arrive within isrbench.request.read.timeout.ms.", bl, float64(st.ReadTimeouts))
		add("kafka_network_socketserver_memorypoolused", "gauge", "Bytes of request buffers connections hold (queued.max.request.bytes pool; kafka.network:type=SocketServer,name=MemoryPoolUsed).", bl, float64(st.MemoryHeld))
		add("isrbench_request_memory_free_bytes", "gauge", "Bytes of request buffers the pool keeps free for reuse (dropped after 10 s unused).", bl, float64(st.MemoryUsed-st.MemoryHeld))
		if st.MemoryLimit >= 0 {
			add("kafka_network_socketserver_memorypoolavailable", "gauge", "Bytes left in the queued.max.request.bytes pool (MemoryPoolAvailable).", bl, float64(st.MemoryLimit-st.MemoryUsed))
		}
	}
	cs := a.c.Controller().Stats()
	add("kafka_controller_kafkacontroller_activebrokercount", "gauge", "Unfenced brokers (ActiveBrokerCount).", "", float64(cs.ActiveBrokers))
	add("kafka_controller_kafkacontroller_fencedbrokercount", "gauge", "Fenced brokers (FencedBrokerCount).", "", float64(cs.FencedBrokers))
	add("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", "Partitions without a leader (OfflinePartitionsCount).", "", float64(cs.OfflinePartitions))
	add("kafka_controller_controllerstats_leaderelections_total", "counter", "Leader elections after topic creation (LeaderElectionRateAndTimeMs count).", "", float64(cs.Elections))
	add("kafka_controller_controllerstats_uncleanleaderelections_total", "counter", "Elections of a leader from outside the ISR (UncleanLeaderElectionsPerSec).", "", float64(cs.UncleanElections))
	add("isrbench_controller_isr_shrinks_total", "counter", "ISR removals made by the controller itself when it fenced a broker or elected a leader.", "", float64(cs.ISRShrinks))
	ss := a.c.Stats()
	add("isrbench_fetch_sendfile_bytes_total", "counter", "Fetch record bytes sent with sendfile(2) (zero copy).", "", float64(ss.SendfileBytes))
	add("isrbench_fetch_copy_bytes_total", "counter", "Fetch record bytes copied through user space (isrbench.zero.copy=false).", "", float64(ss.CopyBytes))
	apis := make([]string, 0, len(ss.Requests))
	for api := range ss.Requests {
		apis = append(apis, api)
	}
	slices.Sort(apis)
	for _, api := range apis {
		add("kafka_network_requestmetrics_requests_total", "counter", "Requests by API (kafka.network:type=RequestMetrics,name=RequestsPerSec).", fmt.Sprintf(`request=%q`, api), float64(ss.Requests[api]))
	}
	for _, name := range order {
		io.WriteString(w, help[name])
		for _, s := range fams[name] {
			if s.labels == "" {
				fmt.Fprintf(w, "%s %s\n", name, strconv.FormatFloat(s.v, 'g', -1, 64))
			} else {
				fmt.Fprintf(w, "%s{%s} %s\n", name, s.labels, strconv.FormatFloat(s.v, 'g', -1, 64))
			}
		}
	}
}
