package cluster

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/config"
	"github.com/isrbench/isrbench/core/controller"
	"github.com/isrbench/isrbench/core/group"
	"github.com/isrbench/isrbench/core/txn"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/netfetch"
)

// MetadataDir is the directory under the cluster's data directory that holds the
// controller's metadata log (topics, configs, partition states, broker epochs).
const MetadataDir = "metadata"

// Config configures an embedded cluster: one in-process controller
// and Brokers brokers, each with its own listener, data directory and
// replica fetchers. A value: Start copies it.
type Config struct {
	Brokers  int    // number of brokers (ids 0..Brokers-1), default 3
	Host     string // listener host, default 127.0.0.1
	BasePort int    // broker i listens on BasePort+i; 0 = ephemeral ports
	// DataDir is the root of the brokers' log.dirs (<DataDir>/broker-<id>);
	// "" = a temporary directory removed by Close.
	DataDir string
	// Broker is the template broker config; ID, DataDir and Addr are set per broker.
	Broker broker.Config
	// Controller configures the controller (broker.session.timeout.ms, unclean election).
	Controller controller.Config
	// ZeroCopy is isrbench.zero.copy (default true).
	ZeroCopy bool
	// ZeroCopyMinBytes is isrbench.zero.copy.min.bytes (default
	// netfetch.DefaultZeroCopyMinBytes): smaller record slices are copied, not sent
	// with sendfile.
	ZeroCopyMinBytes int64
	// FetchSessionCacheSlots is max.incremental.fetch.session.cache.slots (default 1000, 0 =
	// no incremental fetch sessions).
	FetchSessionCacheSlots int
	// FetchSessions is isrbench.fetch.sessions (default true): the replica fetchers use
	// incremental fetch sessions; false sends every partition in every replica fetch.
	FetchSessions bool
	// ReadWhenReady is isrbench.socket.read.when.ready (default true): the wire servers and
	// replica fetchers wait for readability at once after a read that emptied a plaintext
	// socket; false reads it empty (EAGAIN) before every wait.
	ReadWhenReady bool
	// ReplicaFetchUring is isrbench.replica.fetch.uring (default false): each replica fetch
	// on a plaintext connection is one io_uring_enter (netfetch.Transport.SetUring).
	ReplicaFetchUring bool
	// AnswerInline is isrbench.produce.answer.inline (default true): an acks=all produce on
	// a plaintext connection is answered by the goroutine that completes it; false wakes its
	// connection's goroutine to answer it.
	AnswerInline bool
	// WakeAfterResponse is isrbench.produce.wake.after.response (default false): true makes
	// an acks=0/1 produce write its response before its appends wake the followers' parked
	// fetches (Kafka's order); false wakes them first.
	WakeAfterResponse bool
	// AutoCreateTopics is auto.create.topics.enable (default true).
	AutoCreateTopics bool
	// NumPartitions is num.partitions for auto-created topics (default 1).
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor for
	// auto-created topics and CreateTopics without one; 0 = min(3, brokers). Auto-creation
	// with fewer brokers alive fails (INVALID_REPLICATION_FACTOR).
	DefaultReplicationFactor int16
	// SocketRequestMaxBytes is socket.request.max.bytes (default 100 MiB).
	SocketRequestMaxBytes int32
	// Limits are every broker's connection bounds (max.connections,
	// connections.max.idle.ms, queued.max.request.bytes, ...; see ConnLimits).
	Limits netfetch.ConnLimits
	// SessionCheckInterval is how often the controller's CheckSessions
	// runs; 0 = broker.session.timeout.ms / 10 (at least 10 ms).
	SessionCheckInterval time.Duration
	// Logf receives connection-level logs of every server; nil = standard logger.
	Logf func(format string, args ...any)
	// Group is the group coordinator's config (group.* and offsets.*; DefaultConfig
	// sets Kafka's defaults).
	Group group.Config
	// Txn is the transaction coordinator's config (transaction.* and
	// transaction.state.log.*; zero fields take Kafka's defaults).
	Txn txn.Config
	// FS is the file system under every broker's data directory (each broker wraps it in
	// its own vfs.PowerLossFS for the crash fault); nil = vfs.OS. Tests inject failures
	// with a vfs.ErrorFS.
	FS vfs.FS
	// AutoLeaderRebalanceEnable is auto.leader.rebalance.enable (default true): the
	// controller elects preferred leaders back every LeaderImbalanceCheckIntervalSeconds
	// (leader.imbalance.check.interval.seconds, default 300; 0 = the default) for the brokers
	// whose share of preferred partitions they do not lead is above
	// LeaderImbalancePerBrokerPercentage (leader.imbalance.per.broker.percentage, default 10).
	AutoLeaderRebalanceEnable           bool
	LeaderImbalanceCheckIntervalSeconds int64
	LeaderImbalancePerBrokerPercentage  int
	// Security is the listeners and their security (security.go); zero: one PLAINTEXT listener.
	Security SecurityConfig

	// Settings are the broker settings given through Set (reported as STATIC_BROKER_CONFIG),
	// by their registry names (core/config), else the registry's defaults. Every broker
	// gets them unchanged (broker.Config.Settings); a setting with a typed field above is
	// copied into it as well by Set.
	Settings config.Settings
}

// DefaultLeaderImbalanceCheckIntervalSeconds is leader.imbalance.check.interval.seconds'
// default.
const DefaultLeaderImbalanceCheckIntervalSeconds = 300

// DefaultConfig returns 3 brokers on ephemeral 127.0.0.1 ports with every setting at the
// registry's default (Kafka's; isrbench's own for default.replication.factor, min(3,
// brokers), and queued.max.request.bytes): the typed fields are derived from an empty
// Settings (UseSettings).
func DefaultConfig() Config {
	c := Config{
		Brokers:    3,
		Host:       "127.0.0.1",
		Broker:     broker.DefaultConfig(),
		Controller: controller.DefaultConfig(),
		Group:      group.DefaultConfig(),
		Limits:     netfetch.DefaultConnLimits(),
	}
	if err := c.UseSettings(config.Settings{}); err != nil {
		panic("BUG: cluster: the registry's defaults: " + err.Error())
	}
	return c
}

// Cluster is a running embedded cluster. All methods are safe for
// concurrent use; fault methods (Kill/Crash/Restart/Pause/Resume) are
// serialized with each other.
type Cluster struct {
	// Recovery says what was loaded from the metadata log at start (topics, partitions,
	// brokers; a torn tail cut).
	Recovery controller.Recovery

	cfg        Config
	ctrl       *controller.Controller
	root       string
	removeRoot bool
	stats      *netfetch.Counters
	costs      *counters // with stats, the cost counters (cost.go)
	links      netfetch.LinkFaults
	sec        *clusterSecurity // the listeners and their security (security.go)
	nodes      map[int32]*node  // fixed after Start
	ids        []int32

	opMu      sync.Mutex // serializes fault operations and Close
	closed    bool
	stopCheck context.CancelFunc
	checkDone chan struct{}
}

// brokerState values of node.state.
const (
	nodeRunning int32 = iota
	nodePaused
	nodeStopped // killed or crashed
)

type node struct {
	id    int32
	fs    *vfs.PowerLossFS // the broker's disk: what Crash loses is what was not fsynced
	host  string
	port  int
	dir   string
	b     atomic.Pointer[broker.Broker]
	srv   atomic.Pointer[netfetch.Server]
	grp   atomic.Pointer[group.Coordinator] // the broker's group coordinator, handed to srv
	state atomic.Int32
	serve chan struct{}       // closed when the current Serve returns
	extra []netfetch.Listener // the listeners besides the inter-broker one (security.go)
}

// Start starts the controller and every broker (listening, serving
// and fetching) and returns once all brokers are registered and running.
// ctx bounds the start only; Close stops the cluster.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Brokers <= 0 {
		return nil, fmt.Errorf("cluster: cluster brokers = %d: must be >= 1", cfg.Brokers)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.BasePort < 0 || cfg.BasePort+cfg.Brokers-1 > 65535 {
		return nil, fmt.Errorf("cluster: base port %d with %d brokers is outside 0..65535", cfg.BasePort, cfg.Brokers)
	}
	if cfg.SocketRequestMaxBytes <= 0 {
		cfg.SocketRequestMaxBytes = netfetch.DefaultSocketRequestMaxBytes
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 1
	}
	if err := cfg.Limits.Check(cfg.SocketRequestMaxBytes); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := cfg.readFields(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	sec, err := resolveSecurity(&cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{cfg: cfg, stats: netfetch.NewCounters(), costs: new(counters), nodes: map[int32]*node{}, sec: sec}
	fs := cfg.FS // the brokers' disk: vfs.OS counted in the cluster's counters
	if fs == nil {
		fs = vfs.NewOS(&c.costs.vfs)
	}
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "isrbench-cluster-")
		if err != nil {
			return nil, fmt.Errorf("cluster: cluster data dir: %w", err)
		}
		c.root, c.removeRoot = dir, true
	} else {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("cluster: cluster data dir: %w", err)
		}
		c.root = cfg.DataDir
	}
	ccfg := cfg.Controller
	ccfg.Dir = filepath.Join(c.root, MetadataDir)
	if ccfg.FS == nil {
		ccfg.FS = vfs.NewOS(&c.costs.vfs) // as vfs.OS, counted
	}
	if ccfg.Logf == nil {
		ccfg.Logf = cfg.Logf
	}
	if ccfg.ReplicaCapacity == nil {
		// Refuse the topics and partitions the brokers of this process could not host
		// under its file limit as it is when asked (when too low for the logs' open
		// segment files; `isrbench serve` raises it to the hard limit first).
		brokers := cfg.Brokers
		ccfg.ReplicaCapacity = func() (int64, string) { return netfetch.ReplicaCapacity(brokers) }
	}
	ctrl, rec, err := controller.Open(ccfg)
	if err != nil {
		c.cleanup()
		return nil, fmt.Errorf("cluster: cluster metadata: %w", err)
	}
	c.ctrl = ctrl
	c.Recovery = rec
	c.ctrl.SetOffsets(c)
	if err := c.sec.addUsers(ctrl); err != nil {
		c.cleanup()
		return nil, fmt.Errorf("cluster: %w", err)
	}

	// Every node exists before the first broker serves: a server's Metadata asks the
	// leaders' brokers whether they lead yet (pending), and c.nodes is then read unlocked.
	for i := 0; i < cfg.Brokers; i++ {
		id := int32(i)
		c.nodes[id] = &node{id: id, host: cfg.Host, dir: filepath.Join(c.root, "broker-"+strconv.Itoa(i)), fs: vfs.NewPowerLossFS(fs)}
		c.ids = append(c.ids, id)
	}
	for i, id := range c.ids {
		n := c.nodes[id]
		port := 0
		if cfg.BasePort > 0 {
			port = cfg.BasePort + i
		}
		ln, err := c.listen(n, port)
		if err != nil {
			c.closeNodes()
			c.cleanup()
			return nil, fmt.Errorf("cluster: broker %d listen: %w", id, err)
		}
		n.port = ln.Addr().(*net.TCPAddr).Port
		if err := c.startNode(n, ln); err != nil {
			c.closeNodes()
			c.cleanup()
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			c.closeNodes()
			c.cleanup()
			return nil, fmt.Errorf("cluster: starting cluster: %w", err)
		}
	}
	every := cfg.SessionCheckInterval
	if every <= 0 {
		to := cfg.Controller.BrokerSessionTimeoutMs
		if to <= 0 {
			to = controller.DefaultBrokerSessionTimeoutMs
		}
		every = max(10*time.Millisecond, time.Duration(to)*time.Millisecond/10)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c.stopCheck, c.checkDone = cancel, make(chan struct{})
	var loops sync.WaitGroup
	loops.Go(func() { c.ctrl.Run(cctx, every) })
	if cfg.AutoLeaderRebalanceEnable {
		secs := cfg.LeaderImbalanceCheckIntervalSeconds
		if secs <= 0 {
			secs = DefaultLeaderImbalanceCheckIntervalSeconds
		}
		loops.Go(func() {
			c.ctrl.RunLeaderBalancer(cctx, time.Duration(secs)*time.Second, cfg.LeaderImbalancePerBrokerPercentage)
		})
	}
	go func() {
		loops.Wait()
		close(c.checkDone)
	}()
	for _, op := range c.OfflinePartitions() {
		c.logf("cluster: %v", op)
	}
	return c, nil
}

// startNode creates and starts broker n on listener ln.
func (c *Cluster) startNode(n *node, ln net.Listener) error {
	bcfg := c.cfg.Broker
	bcfg.ID, bcfg.DataDir, bcfg.FS, bcfg.Settings, bcfg.Counters = n.id, n.dir, n.fs, c.cfg.Settings, &c.costs.broker
	bcfg.Addr = net.JoinHostPort(n.host, strconv.Itoa(n.port))
	tr := netfetch.NewFaultyTransport(n.id, c.ctrl, &c.links, c.cfg.FetchSessions, c.cfg.Settings)
	tr.SetCounters(c.stats)
	tr.SetReadWhenReady(c.cfg.ReadWhenReady)
	tr.SetUring(c.cfg.ReplicaFetchUring)
	tr.SetSecurity(c.sec.client)
	lname, lsec, extra := c.serverSecurity(n)
	b, err := broker.New(bcfg, c.ctrl, tr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("cluster: broker %d: %w", n.id, err)
	}
	gcfg := c.cfg.Group
	if gcfg.Logf == nil {
		gcfg.Logf = c.cfg.Logf
	}
	grp := group.NewCoordinator(gcfg, b, c.ctrl, nil)
	grp.Start()
	srv := netfetch.NewServer(netfetch.ServerConfig{
		BrokerID: n.id, Broker: b, Controller: c.ctrl, Pending: c.pending, ZeroCopy: c.cfg.ZeroCopy, ZeroCopyMinBytes: c.cfg.ZeroCopyMinBytes, FetchSessionCacheSlots: c.cfg.FetchSessionCacheSlots,
		AutoCreateTopics: c.cfg.AutoCreateTopics, NumPartitions: c.cfg.NumPartitions,
		DefaultReplicationFactor: c.cfg.DefaultReplicationFactor,
		SocketRequestMaxBytes:    c.cfg.SocketRequestMaxBytes, Logf: c.cfg.Logf,
		BrokerConfigs: c.cfg.staticBrokerConfigs(n.id, n.dir), Counters: c.stats,
		Groups: grp, Txn: c.newTxnCoordinator(b), VerifyTxn: c.verifyTxn,
		Limits: c.cfg.Limits, ReadBeforeWait: !c.cfg.ReadWhenReady,
		AnswerOnWake: !c.cfg.AnswerInline, WakeBeforeResponse: !c.cfg.WakeAfterResponse,
		ListenerName: lname, Security: lsec, Listeners: extra,
	}, ln)
	n.b.Store(b)
	n.grp.Store(grp)
	n.srv.Store(srv)
	n.serve = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		if err := srv.Serve(); err != nil {
			c.logf("cluster: %v", err)
		}
	}(n.serve)
	if err := b.Start(); err != nil {
		srv.Close()
		grp.Close()
		b.Kill()
		return fmt.Errorf("cluster: broker %d start: %w", n.id, err)
	}
	n.state.Store(nodeRunning)
	return nil
}

// logf logs with cfg.Logf, or with the standard logger when it is nil (as the servers do).
func (c *Cluster) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
		return
	}
	stdlog.Printf(format, args...)
}

// ReplicaOffsets implements controller.Offsets (lost-offset accounting on
// unclean elections) by asking the broker's replica.
func (c *Cluster) ReplicaOffsets(id int32, topic string, p int32) (leo, hw int64, ok bool) {
	n := c.nodes[id]
	if n == nil || n.state.Load() == nodeStopped {
		return 0, 0, false
	}
	b := n.b.Load()
	if b == nil {
		return 0, 0, false
	}
	return b.ReplicaOffsets(id, topic, p)
}

// pending implements netfetch.ServerConfig.Pending: broker id of this cluster runs but has
// not applied its leadership of topic-p (incarnation topicID) in leaderEpoch yet
// (broker.Leads).
func (c *Cluster) pending(id int32, topic string, topicID controller.TopicID, p, leaderEpoch int32) bool {
	n := c.nodes[id]
	if n == nil || n.state.Load() == nodeStopped {
		return false
	}
	b := n.b.Load()
	return b != nil && !b.Leads(topic, topicID, p, leaderEpoch)
}

// Bootstrap returns "host:port,..." of every broker, in id order.
func (c *Cluster) Bootstrap() string {
	var s []byte
	for i, id := range c.ids {
		if i > 0 {
			s = append(s, ',')
		}
		n := c.nodes[id]
		s = append(s, net.JoinHostPort(n.host, strconv.Itoa(n.port))...)
	}
	return string(s)
}

// Addr returns broker id's listener address.
func (c *Cluster) Addr(id int32) string {
	n := c.nodes[id]
	if n == nil {
		return ""
	}
	return net.JoinHostPort(n.host, strconv.Itoa(n.port))
}

// Controller returns the cluster's controller.
func (c *Cluster) Controller() *controller.Controller { return c.ctrl }

// Groups returns broker id's current group coordinator, or nil when the broker is stopped.
func (c *Cluster) Groups(id int32) *group.Coordinator {
	if n := c.nodes[id]; n != nil && n.state.Load() != nodeStopped {
		return n.grp.Load()
	}
	return nil
}

// Broker returns broker id's current Broker (a new one after RestartBroker), or nil.
func (c *Cluster) Broker(id int32) *broker.Broker {
	if n := c.nodes[id]; n != nil {
		return n.b.Load()
	}
	return nil
}

// BrokerIDs returns the broker ids in order.
func (c *Cluster) BrokerIDs() []int32 { return slices.Clone(c.ids) }

// DataDir is the root data directory (<DataDir>/broker-<id> per broker).
func (c *Cluster) DataDir() string { return c.root }

// Server returns broker id's current wire server, or nil when the broker is stopped.
func (c *Cluster) Server(id int32) *netfetch.Server {
	if n := c.nodes[id]; n != nil && n.state.Load() != nodeStopped {
		return n.srv.Load()
	}
	return nil
}

// Config returns the config the cluster was started with (defaults filled in).
func (c *Cluster) Config() Config { return c.cfg }

// Stats returns the wire-server counters summed over all brokers (kept across restarts).
func (c *Cluster) Stats() netfetch.ServerStats { return c.stats.Snapshot() }

// Sync waits until every running broker has applied every partition
// state change the controller has published so far.
func (c *Cluster) Sync(ctx context.Context) error {
	for _, id := range c.ids {
		if c.nodes[id].state.Load() == nodeStopped {
			continue
		}
		if err := c.ctrl.Sync(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// CreateTopic creates a topic through the controller and waits until every running broker
// has applied the new partition states: up to 10 s plus ApplyAllowance per replica.
func (c *Cluster) CreateTopic(name string, partitions int32, rf int16, configs map[string]string) error {
	if _, err := c.ctrl.CreateTopic(name, partitions, rf, configs); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Duration(partitions)*time.Duration(rf)*ApplyAllowance)
	defer cancel()
	return c.Sync(ctx)
}

// ApplyAllowance is the time a wait for brokers to apply a new topic allows per replica:
// creating a replica creates its directory and files (made durable by one syncfs per batch
// of new replicas), about a millisecond of a loaded machine, so a topic of 10,000
// partitions with RF 3 takes a while to appear on every broker.
const ApplyAllowance = 5 * time.Millisecond

func (c *Cluster) node(id int32) (*node, error) {
	n := c.nodes[id]
	if n == nil {
		return nil, fmt.Errorf("cluster: no broker %d (brokers 0..%d)", id, len(c.ids)-1)
	}
	return n, nil
}

// stopServing closes the node's server (resuming it first so that paused
// connection goroutines exit), waits for its Serve to return, and returns
// the node's broker, resumed and still to be stopped by the caller.
func (n *node) stopServing() *broker.Broker {
	if srv := n.srv.Load(); srv != nil {
		srv.Resume()
		srv.Close()
		<-n.serve
	}
	if g := n.grp.Load(); g != nil {
		g.Close() // after the server: no request reaches it any more
	}
	b := n.b.Load()
	if b != nil {
		b.Resume()
	}
	return b
}

// closeNodes stops every running broker cleanly and returns their Close errors.
func (c *Cluster) closeNodes() error {
	// Stop every broker's fetchers and heartbeats first so that no fetcher
	// keeps re-dialing a broker that is already gone.
	for _, id := range c.ids {
		n := c.nodes[id]
		if n.state.Load() != nodeStopped {
			if b := n.b.Load(); b != nil {
				b.Pause()
			}
		}
	}
	// Then close them side by side: each broker's Close writes its checkpoints and waits
	// for its disk (syncfs), independently of the others.
	errs := make([]error, len(c.ids))
	var wg sync.WaitGroup
	for i, id := range c.ids {
		n := c.nodes[id]
		if n.state.Load() == nodeStopped {
			continue
		}
		n.state.Store(nodeStopped)
		wg.Go(func() {
			if b := n.stopServing(); b != nil {
				if err := b.Close(); err != nil {
					errs[i] = fmt.Errorf("cluster: broker %d close: %w", id, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) cleanup() {
	if c.ctrl != nil {
		c.ctrl.Close()
	}
	if c.removeRoot {
		os.RemoveAll(c.root)
	}
}

// Close stops every broker cleanly, the session checker and the
// controller's deliveries, and removes the data directory if it was
// temporary. It returns the brokers' Close errors (a failed HW checkpoint
// or log close). Idempotent: a second Close returns nil.
func (c *Cluster) Close() error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.stopCheck()
	<-c.checkDone
	err := c.closeNodes()
	c.cleanup()
	return err
}
