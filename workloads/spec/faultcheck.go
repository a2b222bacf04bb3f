package spec

import (
	"fmt"
	"strings"
	"time"
)

// DefaultExecTimeout is faults[].timeout when not given.
const DefaultExecTimeout = 60 * time.Second

// maxExecCommand bounds faults[].command and faults[].undo.
const maxExecCommand = 4096

// execCommand checks a command or undo text from the spec.
func execCommand(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return "", fmt.Errorf("%s: empty; allowed a shell command (sh -c), e.g. \"docker compose stop kafka-{broker}\"", field)
	case len(v) > maxExecCommand:
		return "", fmt.Errorf("%s: %d bytes; allowed at most %d", field, len(v), maxExecCommand)
	case strings.ContainsRune(v, 0):
		return "", fmt.Errorf("%s: contains a NUL byte; allowed a shell command", field)
	}
	return v, nil
}

// validateExecFault checks the exec-only keys of fault i.
func validateExecFault(i int, f Fault) error {
	if f.Kind != "exec" {
		if f.Command != "" || f.Undo != "" || f.Timeout != 0 {
			return fmt.Errorf("faults[%d]: command/undo/timeout apply only to kind exec, not %s", i, f.Kind)
		}
		return nil
	}
	switch {
	case f.Command == "":
		return fmt.Errorf("faults[%d].command is required for kind exec (a shell command; {broker}, {host}, {port} name the target)", i)
	case f.Undo != "" && f.Duration == 0:
		return fmt.Errorf("faults[%d].duration: 0s with an undo command; allowed a duration > 0 (the undo runs at at + duration)", i)
	case f.Undo == "" && f.Duration != 0:
		return fmt.Errorf("faults[%d].duration: %s without an undo command: nothing runs at its end; add faults[%d].undo or drop the duration", i, f.Duration, i)
	}
	return nil
}

// validateReassignFault checks the keys of kind reassign against the spec.
func (s *Spec) validateReassignFault(i int, f Fault) error {
	if f.Kind != "reassign" {
		if f.Add || (f.To != -1 && f.To != 0) {
			return fmt.Errorf("faults[%d]: to/add apply only to kind reassign, not %s", i, f.Kind)
		}
		return nil
	}
	if f.Duration != 0 {
		return fmt.Errorf("faults[%d].duration: %s; a reassignment completes by itself (its end_s is when it did), allowed 0s", i, f.Duration)
	}
	if f.To >= int32(s.Brokers) || f.To < -1 {
		return fmt.Errorf("faults[%d].to: %d is not a broker; allowed -1 (per partition, the lowest id hosting none of its replicas) or 0..%d", i, f.To, s.Brokers-1)
	}
	if f.Add && s.Topic.ReplicationFactor >= s.Brokers {
		return fmt.Errorf("faults[%d].add: every one of the %d brokers hosts a replica of each partition (replication factor %d); add needs more brokers", i, s.Brokers, s.Topic.ReplicationFactor)
	}
	if !f.Add && f.To == -1 && s.Topic.ReplicationFactor >= s.Brokers {
		return fmt.Errorf("faults[%d]: with replication factor %d on %d brokers no broker is free to move a replica to; set brokers above the replication factor", i, s.Topic.ReplicationFactor, s.Brokers)
	}
	return nil
}
