package adminapi

import (
	"fmt"
	"io"
	"slices"
	"strconv"
)

// The metrics of GET /metrics, in the Prometheus text format under the names a Prometheus
// JMX exporter (its usual Kafka rules, lower-cased) gives Kafka's MBeans:
// kafka.server:type=ReplicaManager,name=IsrShrinksPerSec becomes
// kafka_server_replicamanager_isrshrinks_total, kafka.log:type=Log,name=LogEndOffset,topic=T,
// partition=P becomes kafka_log_log_logendoffset{topic="T",partition="P"}. Every sample has a
// broker label (the brokers share one process). docs/metrics.md lists each name against the
// MBean it mirrors; isrbench_* names have no Kafka counterpart.

// metricsWriter collects the samples of one exposition, by family, in first-seen order.
type metricsWriter struct {
	order []string
	help  map[string]string
	fams  map[string][]sample
}

type sample struct {
	labels string
	v      float64
}

func (m *metricsWriter) add(name, typ, help, labels string, v float64) {
	if m.help == nil {
		m.help, m.fams = map[string]string{}, map[string][]sample{}
	}
	if _, ok := m.help[name]; !ok {
		m.help[name] = "# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n"
		m.order = append(m.order, name)
	}
	m.fams[name] = append(m.fams[name], sample{labels, v})
}

// declare writes a family's HELP and TYPE even while it has no sample yet (a labelled
// counter before its first event), so that scrapers and alerts see the name from the start.
func (m *metricsWriter) declare(name, typ, help string) {
	m.add(name, typ, help, "", 0)
	m.fams[name] = m.fams[name][:len(m.fams[name])-1]
}

func (m *metricsWriter) writeTo(w io.Writer) {
	for _, name := range m.order {
		io.WriteString(w, m.help[name])
		for _, s := range m.fams[name] {
			if s.labels == "" {
				fmt.Fprintf(w, "%s %s\n", name, strconv.FormatFloat(s.v, 'g', -1, 64))
			} else {
				fmt.Fprintf(w, "%s{%s} %s\n", name, s.labels, strconv.FormatFloat(s.v, 'g', -1, 64))
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// writeMetrics writes the Prometheus text exposition: per running broker its ReplicaManager
// gauges and counters, its replica fetchers' MaxLag and per-partition lag, per hosted replica
// the Log offsets and the Partition gauges; the controller's gauges and counters; the wire
// servers' counters.
func (a *Server) writeMetrics(w io.Writer) {
	var m metricsWriter
	for _, s := range a.c.Statuses() {
		bl := fmt.Sprintf(`broker="%d"`, s.ID)
		m.add("isrbench_broker_up", "gauge", "1 if the broker is running (not stopped or paused).", bl, b2f(s.State == "running"))
		b := a.c.Broker(s.ID)
		if b == nil || s.State == "stopped" {
			continue
		}
		bm := b.Metrics()
		m.add("kafka_server_replicamanager_isrshrinks_total", "counter", "ISR shrinks this broker made as leader, each an AlterPartition the controller accepted (kafka.server:type=ReplicaManager,name=IsrShrinksPerSec). Under KRaft a fenced broker is removed by the controller instead: isrbench_controller_isr_shrinks_total.", bl, float64(bm.IsrShrinks))
		m.add("kafka_server_replicamanager_isrexpands_total", "counter", "ISR expansions this broker made as leader through AlterPartition (IsrExpandsPerSec).", bl, float64(bm.IsrExpands))
		m.add("kafka_server_replicamanager_underreplicatedpartitions", "gauge", "Led partitions whose ISR is smaller than the replica set (UnderReplicatedPartitions).", bl, float64(bm.UnderReplicatedPartitions))
		m.add("kafka_server_replicamanager_underminisrpartitioncount", "gauge", "Led partitions whose ISR is below min.insync.replicas (UnderMinIsrPartitionCount).", bl, float64(bm.UnderMinIsrPartitionCount))
		m.add("kafka_server_replicamanager_atminisrpartitioncount", "gauge", "Led partitions whose ISR is exactly min.insync.replicas (AtMinIsrPartitionCount).", bl, float64(bm.AtMinIsrPartitionCount))
		m.add("kafka_server_replicamanager_leadercount", "gauge", "Partitions led (LeaderCount).", bl, float64(bm.LeaderCount))
		m.add("kafka_server_replicamanager_partitioncount", "gauge", "Partition replicas hosted (PartitionCount).", bl, float64(bm.PartitionCount))
		ds := b.DamageStats()
		m.add("isrbench_log_damaged_batches_total", "counter", "Batches found failing their CRC in this broker's replicas (by reads and the scrub); each damaged replica is taken out of leadership and the ISR and healed.", bl, float64(ds.Found))
		m.add("isrbench_log_damaged_replicas_truncated_total", "counter", "Damaged replicas truncated below their damage to re-replicate from the leader.", bl, float64(ds.Truncated))
		m.add("isrbench_replica_fetch_corrupt_batches_total", "counter", "Fetched batches failing their CRC that this broker as a follower refused to append.", bl, float64(ds.FetchedCorrupt))
		m.add("isrbench_log_scrub_bytes_total", "counter", "Bytes of sealed segments the background scrub checked (isrbench.log.scrub.*).", bl, float64(ds.ScrubbedBytes))
		m.add("kafka_server_replicafetchermanager_maxlag", "gauge", "Max over the partitions this broker follows of the leader's HW in the last fetch response - the replica's LEO, in records (kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica).", bl+`,clientId="Replica"`, float64(bm.FetcherMaxLag))
		m.add("isrbench_replicamanager_max_follower_lag", "gauge", "The leader's view: max over led partitions of its LEO - a follower's LEO as last fetched, in records (no Kafka MBean).", bl, float64(bm.MaxLag))
		for _, l := range b.FetcherLags() {
			m.add("kafka_server_fetcherlagmetrics_consumerlag", "gauge", "A followed partition's lag: the leader's HW in the last fetch response - the replica's LEO (kafka.server:type=FetcherLagMetrics,name=ConsumerLag).",
				fmt.Sprintf(`broker="%d",clientId="ReplicaFetcherThread-%d-%d",topic=%q,partition="%d"`, s.ID, l.Fetcher, l.Source, l.Topic, l.Partition), float64(l.Lag))
		}
		for _, p := range b.Partitions() {
			pl := fmt.Sprintf(`broker="%d",topic=%q,partition="%d"`, s.ID, p.Topic, p.Partition)
			m.add("kafka_log_log_logendoffset", "gauge", "The replica's LEO, the next offset to write (kafka.log:type=Log,name=LogEndOffset).", pl, float64(p.LEO))
			m.add("kafka_log_log_logstartoffset", "gauge", "The replica's log start offset (kafka.log:type=Log,name=LogStartOffset).", pl, float64(p.LogStart))
			m.add("kafka_log_log_highwatermark", "gauge", "The replica's HW, the first offset consumers cannot read (the third article's kafka.log:type=Log,name=HighWatermark; Kafka itself registers no such MBean).", pl, float64(p.HW))
			isr, rf := 0, 0
			if p.IsLeader {
				isr, rf = len(p.ISR), len(p.Replicas)
				m.add("isrbench_partition_leader_epoch", "gauge", "Leader epoch of a led partition.", pl, float64(p.LeaderEpoch))
			}
			m.add("kafka_cluster_partition_underreplicated", "gauge", "1 if this broker leads the partition and its ISR is smaller than the replication factor (kafka.cluster:type=Partition,name=UnderReplicated); 0 on followers.", pl, b2f(p.UnderReplicated))
			m.add("kafka_cluster_partition_underminisr", "gauge", "1 if led here with the ISR below min.insync.replicas (UnderMinIsr); 0 on followers.", pl, b2f(p.UnderMinISR))
			m.add("kafka_cluster_partition_atminisr", "gauge", "1 if led here with the ISR at min.insync.replicas (AtMinIsr); 0 on followers.", pl, b2f(p.AtMinISR))
			m.add("kafka_cluster_partition_insyncreplicascount", "gauge", "ISR size of a led partition, 0 on followers (kafka.cluster:type=Partition,name=InSyncReplicasCount).", pl, float64(isr))
			m.add("kafka_cluster_partition_replicascount", "gauge", "Replicas of a led partition, 0 on followers (ReplicasCount).", pl, float64(rf))
		}
	}
	for _, id := range a.c.BrokerIDs() {
		srv := a.c.Server(id)
		if srv == nil {
			continue
		}
		st := srv.ConnStats()
		bl := fmt.Sprintf(`broker="%d"`, id)
		m.add("kafka_server_socket_server_metrics_connection_count", "gauge", "Client connections open (socket-server-metrics connection-count).", bl, float64(st.Open))
		m.add("isrbench_connections_limit", "gauge", "Connections the broker accepts at once: min(max.connections, its share of RLIMIT_NOFILE).", bl, float64(st.Limit))
		m.add("isrbench_connections_refused_total", "counter", "Connections closed as soon as accepted: over max.connections, max.connections.per.ip or the file-descriptor share.", bl, float64(st.Refused))
		m.add("isrbench_connections_idle_closed_total", "counter", "Connections closed after connections.max.idle.ms without a request.", bl, float64(st.IdleClosed))
		m.add("isrbench_connections_read_timeouts_total", "counter", "Connections closed because a request did not arrive within isrbench.request.read.timeout.ms.", bl, float64(st.ReadTimeouts))
		m.add("kafka_network_socketserver_memorypoolused", "gauge", "Bytes of request buffers connections hold (queued.max.request.bytes pool; kafka.network:type=SocketServer,name=MemoryPoolUsed).", bl, float64(st.MemoryHeld))
		m.add("isrbench_request_memory_free_bytes", "gauge", "Bytes of request buffers the pool keeps free for reuse (dropped after 10 s unused).", bl, float64(st.MemoryUsed-st.MemoryHeld))
		if st.MemoryLimit >= 0 {
			m.add("kafka_network_socketserver_memorypoolavailable", "gauge", "Bytes left in the queued.max.request.bytes pool (MemoryPoolAvailable).", bl, float64(st.MemoryLimit-st.MemoryUsed))
		}
	}
	cs := a.c.Controller().Stats()
	m.add("kafka_controller_kafkacontroller_activebrokercount", "gauge", "Unfenced brokers (ActiveBrokerCount).", "", float64(cs.ActiveBrokers))
	m.add("kafka_controller_kafkacontroller_fencedbrokercount", "gauge", "Fenced brokers (FencedBrokerCount).", "", float64(cs.FencedBrokers))
	m.add("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", "Partitions without a leader (OfflinePartitionsCount).", "", float64(cs.OfflinePartitions))
	m.add("kafka_controller_controllerstats_leaderelections_total", "counter", "Leader elections after topic creation (LeaderElectionRateAndTimeMs count).", "", float64(cs.Elections))
	m.add("kafka_controller_controllerstats_uncleanleaderelections_total", "counter", "Elections of a leader from outside the ISR (UncleanLeaderElectionsPerSec).", "", float64(cs.UncleanElections))
	m.add("isrbench_controller_isr_shrinks_total", "counter", "ISR removals the controller made itself (KRaft): a fenced broker dropped from the ISRs, an election leaving dead members out, an unclean election's ISR of one. Not in IsrShrinksPerSec, which counts the leaders' AlterPartition shrinks.", "", float64(cs.ISRShrinks))
	ss := a.c.Stats()
	m.add("isrbench_fetch_sendfile_bytes_total", "counter", "Fetch record bytes sent with sendfile(2) (zero copy).", "", float64(ss.SendfileBytes))
	m.add("isrbench_fetch_copy_bytes_total", "counter", "Fetch record bytes copied through user space (isrbench.zero.copy=false).", "", float64(ss.CopyBytes))
	apis := make([]string, 0, len(ss.Requests))
	for api := range ss.Requests {
		apis = append(apis, api)
	}
	slices.Sort(apis)
	const reqHelp = "Requests by API (kafka.network:type=RequestMetrics,name=RequestsPerSec)."
	m.declare("kafka_network_requestmetrics_requests_total", "counter", reqHelp)
	for _, api := range apis {
		m.add("kafka_network_requestmetrics_requests_total", "counter", reqHelp, fmt.Sprintf(`request=%q`, api), float64(ss.Requests[api]))
	}
	m.writeTo(w)
}
