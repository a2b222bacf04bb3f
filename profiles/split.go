package profiles

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/pprof/profile"
)

// Sides of an isrbench process, as the cost accounting splits its CPU time (SideOf).
const (
	SideCluster = "cluster" // goroutines with a broker label: the embedded cluster
	SideClients = "clients" // a client role (producer-client, consumer-client, ...): the harness's Kafka clients
	SideOther   = "other"   // neither: the Go runtime (scheduler, GC workers) and the harness itself
)

// SideOf classifies a sample by its labels: SideCluster when it carries LabelBroker (every
// goroutine of the embedded cluster is labelled: request handlers, replica fetchers, ISR
// expiration, housekeeping), SideClients when LabelRole is a client role (IsClientRole: the
// harness labels every goroutine of its Kafka clients, kgo's own included), SideOther
// otherwise.
func SideOf(s *profile.Sample) string {
	if len(s.Label[LabelBroker]) > 0 {
		return SideCluster
	}
	for _, r := range s.Label[LabelRole] {
		if IsClientRole(r) {
			return SideClients
		}
	}
	return SideOther
}

// IsClientRole reports whether role names one of the harness's Kafka clients: a role ending
// in "-client" (RoleProducerClient, RoleConsumerClient, RoleObserverClient,
// RolePipelineClient, RoleProbeClient).
func IsClientRole(role string) bool { return strings.HasSuffix(role, "-client") }

// Split is a profile's default sample value summed per side (CPU nanoseconds for a CPU
// profile). A plain value.
type Split struct {
	Cluster, Clients, Other int64
	// Samples is how many samples were taken: the sum of the "samples" counts of a CPU
	// profile (one per 10 ms of CPU at 100 Hz), else the number of distinct samples.
	Samples int64
}

// Total is Cluster + Clients + Other.
func (s Split) Total() int64 { return s.Cluster + s.Clients + s.Other }

// Share returns the fraction of the total on side (one of the Side* values); 0 when the
// profile is empty.
func (s Split) Share(side string) float64 {
	t := s.Total()
	if t == 0 {
		return 0
	}
	var v int64
	switch side {
	case SideCluster:
		v = s.Cluster
	case SideClients:
		v = s.Clients
	case SideOther:
		v = s.Other
	}
	return float64(v) / float64(t)
}

// SplitOf splits p's default sample value by SideOf.
func SplitOf(p *profile.Profile) Split {
	vi := valueIndex(p)
	ci := -1
	for i, st := range p.SampleType {
		if st.Type == "samples" && i != vi {
			ci = i
		}
	}
	var sp Split
	for _, s := range p.Sample {
		if ci >= 0 {
			sp.Samples += s.Value[ci]
		} else {
			sp.Samples++
		}
		v := s.Value[vi]
		switch SideOf(s) {
		case SideCluster:
			sp.Cluster += v
		case SideClients:
			sp.Clients += v
		default:
			sp.Other += v
		}
	}
	return sp
}

// ReadSplit parses a pprof profile (gzipped or not) from r and splits it by SideOf.
func ReadSplit(r io.Reader) (Split, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return Split{}, fmt.Errorf("profiles: not a pprof profile: %w", err)
	}
	if len(p.SampleType) == 0 {
		return Split{}, fmt.Errorf("profiles: profile has no sample types")
	}
	return SplitOf(p), nil
}

// SplitFile is ReadSplit of a pprof file.
func SplitFile(file string) (Split, error) {
	p, err := Load(file)
	if err != nil {
		return Split{}, err
	}
	return SplitOf(p), nil
}

// writeSplit prints the split line of Top's per-label view.
func writeSplit(w io.Writer, p *profile.Profile, fmtv func(int64) string) {
	sp := SplitOf(p)
	t := sp.Total()
	fmt.Fprintf(w, "\nSplit: cluster %s (%s), clients %s (%s), other %s (%s)\n",
		fmtv(sp.Cluster), pct(sp.Cluster, t), fmtv(sp.Clients), pct(sp.Clients, t), fmtv(sp.Other), pct(sp.Other, t))
	fmt.Fprintln(w, "  cluster: samples with a broker label; clients: a client role (producer-, consumer-, observer-, pipeline-client);")
	fmt.Fprintln(w, "  other: the Go runtime (scheduler, GC workers) and the harness (the cost table in result.json splits the same way)")
}
