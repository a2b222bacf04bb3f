package workloads

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// FaultsReportFile is the name of the run's fault and replication report, next to
// result.json (result.json files.faults names it).
const FaultsReportFile = "faults.json"

// FaultsReport is faults.json: what the partition timeline, the producer groups and the
// replica-log check measured. These are measurements, so they stay out of result.json's
// config (which identifies a configuration for grouping and sweeps); result.json faults[i]
// detail repeats the per-fault figures as text. A plain value.
type FaultsReport struct {
	// PartitionsCSV is the per-partition timeline file (100 ms rows), relative to the run dir;
	// empty when the target cannot report per-partition state.
	PartitionsCSV        string     `json:"partitions_csv,omitempty"`
	ISREvents            []ISREvent `json:"isr_events"`
	ISRShrinks           int        `json:"isr_shrinks"` // shrink events seen at 100 ms resolution
	ISRExpands           int        `json:"isr_expands"`
	LeaderlessPartitionS float64    `json:"leaderless_partition_s"` // partition-seconds without a leader
	// Faults are the applied faults in schedule order with their timeline figures.
	Faults         []FaultFigures `json:"faults"`
	ProducerGroups []GroupFigures `json:"producer_groups"`
	ReplicaLogs    *ReplicaLogs   `json:"replica_logs,omitempty"`
	// LossExpected says why acknowledged acks=all records may be lost ("" = they must not).
	LossExpected string `json:"loss_expected,omitempty"`
}

// FaultFigures are one fault's timeline figures (seconds since the start of measurement).
type FaultFigures struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
	AtS    float64 `json:"at_s"`
	EndS   float64 `json:"end_s"` // 0 = instantaneous or never healed
	// TimeToShrinkS: fault start -> first ISR shrink after it (-1 = none seen).
	TimeToShrinkS float64 `json:"time_to_shrink_s"`
	// TimeToRejoinS: fault end -> every partition back to its full ISR (-1 = never; 0 = it
	// was fully replicated when the fault ended).
	TimeToRejoinS float64 `json:"time_to_rejoin_s"`
	// FailedProduces: failed records meant for [start, end + rejoin].
	FailedProduces       int64   `json:"failed_produces"`
	LeaderlessPartitionS float64 `json:"leaderless_partition_s"`
}

// GroupFigures are one producer group's failures.
type GroupFigures struct {
	Group  int              `json:"group"`
	Acks   string           `json:"acks"`
	Count  int              `json:"count"`
	Acked  int64            `json:"acked"`  // acknowledged records (whole run)
	Failed int64            `json:"failed"` // failed records (whole run)
	Errors map[string]int64 `json:"errors"` // error name -> failed records
}

// ReplicaLogs is the verdict of reading every running replica's log directly.
type ReplicaLogs struct {
	Checked   int    `json:"checked"`   // replica logs read
	Lost      int64  `json:"lost"`      // acknowledged leader records below the HW missing on a replica
	Identical bool   `json:"identical"` // every replica holds the leader's records at the same offsets
	Note      string `json:"note,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ReadFaultsReport reads <runDir>/faults.json.
func ReadFaultsReport(runDir string) (*FaultsReport, error) {
	b, err := os.ReadFile(filepath.Join(runDir, FaultsReportFile))
	if err != nil {
		return nil, err
	}
	var r FaultsReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(runDir, FaultsReportFile), err)
	}
	return &r, nil
}

func writeFaultsReport(runDir string, r *FaultsReport) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(runDir, FaultsReportFile), append(b, '\n'), 0o644)
}
