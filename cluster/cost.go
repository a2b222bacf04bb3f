package cluster

import (
	"time"

	"github.com/isrbench/isrbench/core/broker"
	"github.com/isrbench/isrbench/core/log"
	"github.com/isrbench/isrbench/core/vfs"
	"github.com/isrbench/isrbench/netfetch"
)

// Cost is a snapshot of the cost counters of one cluster: the system calls, bytes, requests
// and request times of its brokers, wire servers, replica fetchers and metadata log, kept
// across broker restarts, for the harness's cost accounting (take two snapshots and subtract).
// Another cluster of the same process counts in its own. A snapshot value.
type Cost struct {
	// VFS are the file calls made through the cluster's file system when Config.FS is nil (with
	// Config.FS set, that file system's calls are not counted).
	VFS vfs.SyscallCounts
	// Log are the system calls of the brokers' log writers, the io_uring_enter calls made for
	// them on the process's one ring included (log.Counters.Syscalls).
	Log log.SyscallCounts
	// Net are the wire servers' and the replica fetchers' socket calls, bytes and requests.
	Net netfetch.Cost
	// ApplyTime is the time the brokers' fetchers spent applying replica fetch responses.
	ApplyTime time.Duration
}

// Sub returns c - o, field by field.
func (c Cost) Sub(o Cost) Cost {
	return Cost{VFS: c.VFS.Sub(o.VFS), Log: c.Log.Sub(o.Log), Net: c.Net.Sub(o.Net), ApplyTime: c.ApplyTime - o.ApplyTime}
}

// counters are the cost counters a cluster owns and hands down to what it builds: the file
// system (vfs.NewOS), each broker (broker.Config.Counters, which counts its log writers),
// each wire server (netfetch.ServerConfig.Counters, the cluster's existing server counters)
// and each broker's replica-fetch transport (Transport.SetCounters).
type counters struct {
	vfs    vfs.Counters
	broker broker.Counters
}

// Cost returns the cluster's cost counters so far. Safe for concurrent use.
func (c *Cluster) Cost() Cost {
	return Cost{VFS: c.costs.vfs.Syscalls(), Log: c.costs.broker.Log.Syscalls(), Net: c.stats.Cost(),
		ApplyTime: c.costs.broker.ApplyTime()}
}
