package replicaverify

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Write prints the report: one row per replica (its role, log start, HW, LEO and lag behind
// the leader's LEO), then one line per partition with the range verified or its divergence.
func (r *Report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICA\tROLE\tLOG-START\tHIGH-WATERMARK\tLOG-END-OFFSET\tLAG")
	for _, p := range r.Partitions {
		for _, rp := range p.Replicas {
			role := "follower"
			switch {
			case rp.Leader:
				role = "leader"
			case !rp.InISR:
				role = "out-of-sync"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, rp.Broker, role, num(rp.LogStart), num(rp.HW), num(rp.LEO), num(rp.Lag))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, p := range r.Partitions {
		var ids []string
		for _, rp := range p.Replicas {
			if rp.Err == "" {
				ids = append(ids, strconv.Itoa(int(rp.Broker)))
			}
		}
		switch {
		case p.Divergence != nil:
			fmt.Fprintf(w, "DIVERGED %s (identical before it: [%d, %d), %s)\n", p.Divergence, p.From, p.Verified, batches(p.Batches))
		case p.From < 0 || p.Verified < 0:
			fmt.Fprintf(w, "partition %s-%d: not verified: no replica could be read\n", p.Topic, p.Partition)
		default:
			fmt.Fprintf(w, "partition %s-%d: replicas %s identical in [%d, %d) (%s)\n", p.Topic, p.Partition, strings.Join(ids, ","), p.From, p.Verified, batches(p.Batches))
		}
		for _, rp := range p.Replicas {
			if rp.Err != "" {
				fmt.Fprintf(w, "partition %s-%d: replica %d not checked: %s\n", p.Topic, p.Partition, rp.Broker, rp.Err)
			}
		}
	}
	if lag, p, ok := r.MaxLag(); ok {
		fmt.Fprintf(w, "max lag is %d for partition %s-%d at offset %d among %d partitions\n", lag, p.Topic, p.Partition, p.Verified, len(r.Partitions))
	}
	return nil
}

// MaxLag is ReplicaVerificationTool's summary: the largest distance, over the partitions
// verified, between the highest HW of a partition's replicas and the end of what was verified
// (records), with that partition; ok is false when no partition was verified.
func (r *Report) MaxLag() (lag int64, p Partition, ok bool) {
	lag = -1
	for _, q := range r.Partitions {
		if q.Verified < 0 {
			continue
		}
		hw := q.Verified
		for _, rp := range q.Replicas {
			hw = max(hw, rp.HW)
		}
		if hw-q.Verified > lag {
			lag, p, ok = hw-q.Verified, q, true
		}
	}
	return lag, p, ok
}

func num(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

func batches(n int) string {
	if n == 1 {
		return "1 batch"
	}
	return strconv.Itoa(n) + " batches"
}
