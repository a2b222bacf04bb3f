package kafkatool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The consumer group operations of kafka-consumer-groups.sh, printing what it prints.

// ListGroups prints every group id, one a line, sorted (--list).
func ListGroups(ctx context.Context, adm *kadm.Client, w io.Writer) error {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("groups: list: %w", err)
	}
	for _, g := range gs.Sorted() {
		fmt.Fprintln(w, g.Group)
	}
	return nil
}

// lagRow is one line of --describe.
type lagRow struct {
	group, topic             string
	partition                int32
	current, end, lag        string
	consumer, host, clientID string
}

// DescribeGroups prints, per group, its partitions with the committed offset (CURRENT-OFFSET),
// the log end offset (the high watermark), the lag between them and the member consuming
// the partition, as kafka-consumer-groups.sh --describe does: "-" where there is no commit
// or no member; a note when the group has no active members or is rebalancing. A group that
// does not exist, or cannot be described, is an error after the others are printed.
func DescribeGroups(ctx context.Context, adm *kadm.Client, groups []string, w io.Writer) error {
	lags, err := adm.Lag(ctx, groups...)
	if err != nil {
		return fmt.Errorf("groups: describe: %w", err)
	}
	var errs []error
	for _, g := range groups {
		l, ok := lags[g]
		if !ok {
			errs = append(errs, fmt.Errorf("consumer group '%s': no answer", g))
			continue
		}
		if err := l.Error(); err != nil {
			errs = append(errs, fmt.Errorf("consumer group '%s': %w", g, err))
			continue
		}
		if l.State == "Dead" {
			fmt.Fprintf(w, "\nError: Consumer group '%s' does not exist.\n", g)
			errs = append(errs, fmt.Errorf("consumer group '%s' does not exist", g))
			continue
		}
		switch {
		case l.State == "PreparingRebalance" || l.State == "CompletingRebalance":
			fmt.Fprintf(w, "\nWarning: Consumer group '%s' is rebalancing.\n", g)
		case len(l.Members) == 0:
			fmt.Fprintf(w, "\nConsumer group '%s' has no active members.\n", g)
		}
		var rows []lagRow
		for _, ps := range l.Lag {
			for _, ml := range ps {
				r := lagRow{group: g, topic: ml.Topic, partition: ml.Partition, current: "-", end: "-", lag: "-", consumer: "-", host: "-", clientID: "-"}
				if ml.Commit.At >= 0 {
					r.current = fmt.Sprint(ml.Commit.At)
				}
				if ml.End.Err == nil && ml.End.Offset >= 0 {
					r.end = fmt.Sprint(ml.End.Offset)
				}
				if ml.Lag >= 0 && ml.Commit.At >= 0 {
					r.lag = fmt.Sprint(ml.Lag)
				}
				if ml.Member != nil {
					r.consumer, r.host, r.clientID = ml.Member.MemberID, ml.Member.ClientHost, ml.Member.ClientID
				}
				rows = append(rows, r)
			}
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].topic != rows[j].topic {
				return rows[i].topic < rows[j].topic
			}
			return rows[i].partition < rows[j].partition
		})
		printLagRows(w, rows)
	}
	if len(errs) > 0 {
		return fmt.Errorf("groups: %w", errors.Join(errs...))
	}
	return nil
}

func printLagRows(w io.Writer, rows []lagRow) {
	gw, tw, cw, hw := 15, 15, 15, 15
	for _, r := range rows {
		gw, tw, cw, hw = max(gw, len(r.group)), max(tw, len(r.topic)), max(cw, len(r.consumer)), max(hw, len(r.host))
	}
	f := fmt.Sprintf("%%-%ds %%-%ds %%-10s %%-15s %%-15s %%-15s %%-%ds %%-%ds %%s\n", gw, tw, cw, hw)
	fmt.Fprintln(w)
	fmt.Fprintf(w, f, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")
	for _, r := range rows {
		fmt.Fprintf(w, f, r.group, r.topic, fmt.Sprint(r.partition), r.current, r.end, r.lag, r.consumer, r.host, r.clientID)
	}
}

// ResetTo is where --reset-offsets moves a group's offsets.
type ResetTo struct {
	Earliest, Latest bool
	Offset           int64 // with neither: --to-offset
}

// ResetOffsets computes the new committed offset of each partition of topics (every partition
// of each; a partition list per topic limits it) for group and prints them as
// kafka-consumer-groups.sh --reset-offsets does; with execute it commits them. --to-earliest
// is each partition's log start, --to-latest its high watermark, --to-offset the offset
// bounded to [log start, high watermark] (with a warning, as Kafka's tool clamps it). As in
// Kafka, only an inactive group (Empty, or unknown) may be reset.
func ResetOffsets(ctx context.Context, adm *kadm.Client, group string, topics map[string][]int32, to ResetTo, execute bool, w io.Writer) error {
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("groups: describe %s: %w", group, err)
	}
	if d, ok := dg[group]; ok {
		if d.Err != nil {
			return fmt.Errorf("groups: describe %s: %w", group, d.Err)
		}
		if d.State != "Empty" && d.State != "Dead" {
			return fmt.Errorf("groups: assignments can only be reset if the group '%s' is inactive, but the current state is %s", group, d.State)
		}
	}
	names := slices.Sorted(maps.Keys(topics))
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("groups: list earliest offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("groups: list latest offsets: %w", err)
	}
	var plan kadm.Offsets
	for _, t := range names {
		want := topics[t]
		var parts []int32
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == t && (len(want) == 0 || slices.Contains(want, o.Partition)) {
				parts = append(parts, o.Partition)
			}
		})
		if len(parts) == 0 {
			return fmt.Errorf("groups: topic %s: no such topic or partitions", t)
		}
		for _, p := range want {
			if !slices.Contains(parts, p) {
				return fmt.Errorf("groups: topic %s has no partition %d", t, p)
			}
		}
		for _, p := range parts {
			s, _ := starts.Lookup(t, p)
			e, _ := ends.Lookup(t, p)
			if s.Err != nil || e.Err != nil {
				return fmt.Errorf("groups: offsets of %s-%d: %w", t, p, errors.Join(s.Err, e.Err))
			}
			var at int64
			switch {
			case to.Earliest:
				at = s.Offset
			case to.Latest:
				at = e.Offset
			default:
				at = to.Offset
				if at > e.Offset {
					fmt.Fprintf(w, "WARN: New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be set to %d\n", at, t, p, e.Offset)
					at = e.Offset
				} else if at < s.Offset {
					fmt.Fprintf(w, "WARN: New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be set to %d\n", at, t, p, s.Offset)
					at = s.Offset
				}
			}
			plan.Add(kadm.Offset{Topic: t, Partition: p, At: at, LeaderEpoch: -1})
		}
	}
	if execute {
		rs, err := adm.CommitOffsets(ctx, group, plan)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("groups: commit the new offsets of %s: %w", group, err)
		}
	}
	f := "%-30s %-30s %-10s %-15s\n"
	fmt.Fprintln(w)
	fmt.Fprintf(w, f, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
	for _, o := range plan.Sorted() {
		fmt.Fprintf(w, f, group, o.Topic, fmt.Sprint(o.Partition), fmt.Sprint(o.At))
	}
	if !execute {
		fmt.Fprintln(w, "WARN: No action will be performed as the --execute option is missing. In a future major release, the default behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to keep the current default behavior without prompting.")
	}
	return nil
}

// DeleteGroups deletes groups (--delete), which must be empty, and says which were deleted.
func DeleteGroups(ctx context.Context, adm *kadm.Client, groups []string, w io.Writer) error {
	rs, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("groups: delete: %w", err)
	}
	var ok, failed []string
	for _, g := range groups {
		r, answered := rs[g]
		switch {
		case !answered:
			failed = append(failed, fmt.Sprintf("* Group '%s' could not be deleted: no answer", g))
		case r.Err != nil:
			failed = append(failed, fmt.Sprintf("* Group '%s' could not be deleted due to: %v", g, describeErr(r.Err)))
		default:
			ok = append(ok, "'"+g+"'")
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(w, "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(ok, ", "))
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "Error: Deletion of some consumer groups failed:\n%s\n", strings.Join(failed, "\n"))
		return fmt.Errorf("groups: %d of %d groups not deleted", len(failed), len(groups))
	}
	return nil
}

// DeleteOffsets deletes group's committed offsets of topics (every partition of a topic
// without a partition list) and prints each partition's status, as
// kafka-consumer-groups.sh --delete-offsets does.
func DeleteOffsets(ctx context.Context, adm *kadm.Client, group string, topics map[string][]int32, w io.Writer) error {
	set := kadm.TopicsSet{}
	var whole []string
	for t, ps := range topics {
		if len(ps) == 0 {
			whole = append(whole, t)
			continue
		}
		set.Add(t, ps...)
	}
	if len(whole) > 0 {
		md, err := adm.Metadata(ctx, whole...)
		if err != nil {
			return fmt.Errorf("groups: metadata: %w", err)
		}
		for _, t := range whole {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil || len(td.Partitions) == 0 {
				set.Add(t, 0) // the broker answers UNKNOWN_TOPIC_OR_PARTITION
				continue
			}
			for p := range td.Partitions {
				set.Add(t, p)
			}
		}
	}
	rs, err := adm.DeleteOffsets(ctx, group, set)
	if err != nil {
		fmt.Fprintf(w, "Error: Encounter some unknown error: %v\n", describeErr(err))
		return fmt.Errorf("groups: delete offsets of %s: %w", group, err)
	}
	failed := 0
	if err := rs.Error(); err != nil {
		fmt.Fprintf(w, "Error: Encounter some partition level error, see the follow-up details:\n")
	} else {
		fmt.Fprintf(w, "Request succeed for deleting offsets with topic %s group %s\n", strings.Join(slices.Sorted(maps.Keys(topics)), ", "), group)
	}
	f := "%-30s %-15s %-15s\n"
	fmt.Fprintln(w)
	fmt.Fprintf(w, f, "TOPIC", "PARTITION", "STATUS")
	for _, tp := range set.Sorted() {
		for _, p := range tp.Partitions {
			status := "Successful"
			if perr, ok := rs.Lookup(tp.Topic, p); !ok {
				status, failed = "Error: no answer", failed+1
			} else if perr != nil {
				status, failed = "Error: "+describeErr(perr), failed+1
			}
			fmt.Fprintf(w, f, tp.Topic, fmt.Sprint(p), status)
		}
	}
	if failed > 0 {
		return fmt.Errorf("groups: %d partitions' offsets not deleted", failed)
	}
	return nil
}

// describeErr is a Kafka error's name and description, or err's text.
func describeErr(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message + ": " + ke.Description
	}
	return err.Error()
}
