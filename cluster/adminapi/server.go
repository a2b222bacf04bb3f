package adminapi

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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
//	                               FetcherLagMetrics, Log, Partition, KafkaController and
//	                               wire-server figures (metrics.go; docs/metrics.md)
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
