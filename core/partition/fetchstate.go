package partition

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// FetchPhase is where a follower partition is in Kafka's replica-fetch protocol
// (AbstractFetcherThread's PartitionFetchState).
type FetchPhase uint8

const (
	// PhaseTruncating: before fetching from a (new) leader, find the divergence point with
	// OffsetForLeaderEpoch rounds (KIP-101/KIP-279) and truncate to it.
	PhaseTruncating FetchPhase = iota
	// PhaseFetching: replica fetches at the local LEO.
	PhaseFetching
	// PhaseResolvingOffsets: the leader answered OFFSET_OUT_OF_RANGE; ask it for its log
	// start and end offsets (ListOffsets as a replica) and truncate (Kafka's
	// fetchOffsetAndTruncate).
	PhaseResolvingOffsets
	// PhaseAwaitingAssignment: fenced by a newer leader epoch, or the local log failed:
	// nothing to do until the next assignment.
	PhaseAwaitingAssignment
)

func (p FetchPhase) String() string {
	switch p {
	case PhaseTruncating:
		return "truncating"
	case PhaseFetching:
		return "fetching"
	case PhaseResolvingOffsets:
		return "resolving-offsets"
	case PhaseAwaitingAssignment:
		return "awaiting-assignment"
	}
	return "unknown"
}

// FetchView is what the fetch decisions read of the local replica; *Replica implements it.
type FetchView interface {
	LEO() int64
	HW() int64
	LatestEpoch() int32
	TruncationFor(leaderEpoch int32, leaderEndOffset int64) Truncation
}

// FetchActionKind says what the caller must do to the local replica after a decision.
type FetchActionKind uint8

const (
	// ActNone: nothing to change locally.
	ActNone FetchActionKind = iota
	// ActTruncate: Replica.TruncateTo(Offset).
	ActTruncate
	// ActTruncateFully: Replica.TruncateFullyAndStartAt(Offset).
	ActTruncateFully
)

// FetchAction is a decision's effect on the local log.
type FetchAction struct {
	Kind   FetchActionKind
	Offset int64
}

// FetchState is one follower partition's replica-fetch state machine, as pure code: no I/O,
// no goroutines, no clock reads (times are arguments, in ns). The broker's fetchers run it
// for every assigned partition and carry out its actions; the scripted tests and the
// simulator drive the same code. A FetchState belongs to one fetcher goroutine.
type FetchState struct {
	// LeaderEpoch is the leader epoch the partition was assigned with: the
	// CurrentLeaderEpoch of its requests.
	LeaderEpoch int32
	Phase       FetchPhase
	// DelayedUntil holds the partition back until then (replica.fetch.backoff.ms after
	// an error); 0 = not delayed.
	DelayedUntil int64
	// TruncateToHW is the "hw" ablation: truncate to the local HW instead of asking the
	// leader (pre-KIP-101).
	TruncateToHW bool
}

// NewFetchState is a partition just assigned to fetch from the leader of leaderEpoch: it
// truncates first.
func NewFetchState(leaderEpoch int32, truncateToHW bool) FetchState {
	return FetchState{LeaderEpoch: leaderEpoch, Phase: PhaseTruncating, TruncateToHW: truncateToHW}
}

// Ready reports whether the partition takes part in the next round at now.
func (s *FetchState) Ready(now int64) bool {
	return s.Phase != PhaseAwaitingAssignment && (s.DelayedUntil == 0 || now >= s.DelayedUntil)
}

func (s *FetchState) delay(now, backoff int64) { s.DelayedUntil = now + backoff }

// LeaderBehindRetryNs is how soon a partition asks again after the leader answered
// UNKNOWN_LEADER_EPOCH, at most replica.fetch.backoff.ms. That answer means the leader has not
// yet applied the leader epoch the controller already committed and this follower already
// knows; it will within milliseconds, so waiting the whole backoff (1 s by default, which is
// what Kafka's fetcher does) only leaves the new leader's HW behind: its HW waits for every ISR
// follower's first fetch of the term, so consumers read nothing new for that second. Retrying
// sooner is safe: the question is asked again, nothing is appended.
const LeaderBehindRetryNs = int64(20 * time.Millisecond)

// delayFor delays the partition after err: LeaderBehindRetryNs for UNKNOWN_LEADER_EPOCH,
// backoff for everything else.
func (s *FetchState) delayFor(err error, now, backoff int64) {
	if errors.Is(err, kerr.UnknownLeaderEpoch) {
		backoff = min(backoff, LeaderBehindRetryNs)
	}
	s.delay(now, backoff)
}

// TruncationStep starts a truncation round (PhaseTruncating, ready). Without a local epoch
// to ask about (an empty cache, as after TruncateFullyAndStartAt) or in the "hw" ablation the
// follower truncates to its HW without asking (Kafka's fallback) and starts fetching; else it
// asks the leader for the end offset of its latest epoch (ask = true, epoch).
func (s *FetchState) TruncationStep(v FetchView) (epoch int32, ask bool, act FetchAction) {
	latest := v.LatestEpoch()
	if s.TruncateToHW || latest == UndefinedEpoch {
		s.Phase = PhaseFetching
		// The rule of an UNDEFINED answer: TruncationOffset's fallback to the HW.
		return 0, false, truncateTo(v, v.TruncationFor(UndefinedEpoch, UndefinedEpochOffset).Offset)
	}
	return latest, true, FetchAction{}
}

// OnEpochAnswer applies the leader's OffsetForLeaderEpoch answer to a question about epoch
// asked: (leaderEpoch, endOffset) or err. It truncates to the divergence point and starts
// fetching when the logs agree; in the KIP-279 case (the leader answered with an older epoch
// than the follower has) it stays truncating and asks again next round.
func (s *FetchState) OnEpochAnswer(v FetchView, asked, leaderEpoch int32, endOffset int64, err error, now, backoff int64) FetchAction {
	switch {
	case err != nil && errors.Is(err, kerr.FencedLeaderEpoch):
		s.Phase = PhaseAwaitingAssignment
		return FetchAction{}
	case err != nil:
		s.delayFor(err, now, backoff) // UNKNOWN_LEADER_EPOCH (the leader is behind), NOT_LEADER, ...
		return FetchAction{}
	case leaderEpoch > asked:
		// A leader must answer with an epoch <= the one asked for.
		s.delay(now, backoff)
		return FetchAction{}
	}
	t := v.TruncationFor(leaderEpoch, endOffset)
	if t.Done {
		s.Phase = PhaseFetching
	}
	// Always truncate, also at the LEO: TruncateTo drops the epoch cache entries that start
	// at or past the offset, so the follower's latest epoch falls and the next KIP-279 round
	// asks about an older one (an epoch with no records would be asked about forever).
	return FetchAction{Kind: ActTruncate, Offset: t.Offset}
}

// OnFetchError handles a partition error of a replica fetch response.
func (s *FetchState) OnFetchError(err error, now, backoff int64) {
	switch {
	case errors.Is(err, kerr.OffsetOutOfRange):
		s.Phase = PhaseResolvingOffsets
	case errors.Is(err, kerr.FencedLeaderEpoch):
		s.Phase = PhaseAwaitingAssignment // our epoch is old: wait for the new assignment
	default:
		// UNKNOWN_LEADER_EPOCH (the leader has not applied the new epoch yet),
		// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...
		s.delayFor(err, now, backoff)
	}
}

// OnLeaderOffsets applies the leader's log start (earliest) and end (latest, its LEO)
// offsets, asked after OFFSET_OUT_OF_RANGE: Kafka's fetchOffsetAndTruncate. A leader behind
// the local LEO (after an unclean election) makes the follower truncate to the leader's end;
// a leader whose log starts past the local LEO (retention deleted what the follower lacks)
// makes it start over at the leader's log start; otherwise it fetches again from its LEO.
func (s *FetchState) OnLeaderOffsets(v FetchView, leaderStart, leaderEnd int64, err error, now, backoff int64) FetchAction {
	switch {
	case err != nil && errors.Is(err, kerr.FencedLeaderEpoch):
		s.Phase = PhaseAwaitingAssignment
		return FetchAction{}
	case err != nil || leaderStart < 0 || leaderEnd < 0:
		s.delay(now, backoff)
		return FetchAction{}
	}
	s.Phase = PhaseFetching
	leo := v.LEO()
	switch {
	case leaderEnd < leo:
		return FetchAction{Kind: ActTruncate, Offset: leaderEnd}
	case leaderStart > leo:
		return FetchAction{Kind: ActTruncateFully, Offset: leaderStart}
	}
	return FetchAction{}
}

// OnAppendError handles a failed follower append (or truncation): a storage error takes the
// partition out of fetching (its log is offline); anything else (a batch that does not fit:
// divergence) truncates again after the backoff.
func (s *FetchState) OnAppendError(err error, now, backoff int64) {
	if errors.Is(err, kerr.KafkaStorageError) {
		s.Phase = PhaseAwaitingAssignment
		return
	}
	s.Phase = PhaseTruncating
	s.delay(now, backoff)
}

func truncateTo(v FetchView, offset int64) FetchAction {
	if offset < v.LEO() {
		return FetchAction{Kind: ActTruncate, Offset: offset}
	}
	return FetchAction{}
}
