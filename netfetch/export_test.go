package netfetch

import "github.com/isrbench/isrbench/core/txn"

// Hooks for the external tests (package netfetch_test, which run the wire server inside an
// embedded cluster): the internals they check against.

// Advertised returns how many API keys ApiVersions advertises.
func Advertised() int { return len(advertised()) }

// ClusterOperations is the cluster_authorized_operations bit field DescribeCluster answers.
const ClusterOperations = clusterOperations

// FDShareOf and NoFile are fdShareOf and noFile: the file-descriptor share of a broker when
// servers brokers share RLIMIT_NOFILE nofile, and the process's soft RLIMIT_NOFILE.
var (
	FDShareOf = fdShareOf
	NoFile    = noFile
)

// OnProduceAnswered makes s call f once a produce request is handled (its response written,
// if any), before the followers' wake-ups it owes (isrbench.produce.wake.after.response).
func OnProduceAnswered(s *Server, f func()) { s.onProduceAnswered.Store(&f) }

// OnTxnVerified makes s call f after a produce's partition passed its transaction
// verification, before its append.
func OnTxnVerified(s *Server, f func(topic string, partition int32)) {
	h := func(tp txn.TP) { f(tp.Topic, tp.Partition) }
	s.onTxnVerified.Store(&h)
}

// SetUringSendMax sets the largest request frame a replica fetcher sends through its io_uring
// exchange (isrbench.replica.fetch.uring) until the test ends.
func SetUringSendMax(t interface{ Cleanup(func()) }, n int) {
	old := uringSendMax
	uringSendMax = n
	t.Cleanup(func() { uringSendMax = old })
}
