package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/isrbench/isrbench/cluster"
)

func needKcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil && os.Getenv("ISRBENCH_REQUIRE_KCAT") == "1" {
		t.Fatalf("kcat is not installed (ISRBENCH_REQUIRE_KCAT=1): %v", err)
	}
	need(t, "kcat", err)
	return p
}

func kcatClient(kcat string) client { return kcatClientSec(kcat, "kcat", nil) }

// kcatClientSec is kcatClient with librdkafka properties (-F FILE) and the admin client's
// security for the delete: the row name says which.
func kcatClientSec(kcat, name string, sec *security) client {
	var f []string
	var kopts []kgo.Opt
	if sec != nil {
		f, kopts = []string{"-F", sec.props}, sec.kgo
	}
	return client{
		name: name,
		produce: func(boot, topic string, start, count int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Keyed (key = value), so that the records spread over the partitions: keyless
			// records from one burst all go to one partition (sticky partitioning).
			cmd := exec.CommandContext(ctx, kcat, append(slices.Clone(f), "-P", "-b", boot, "-t", topic, "-X", "acks=all", "-K", ":")...)
			var in strings.Builder
			for i := start; i < start+count; i++ {
				fmt.Fprintf(&in, "%d:%d\n", i, i)
			}
			cmd.Stdin = strings.NewReader(in.String())
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("kcat -P: %v: %s", err, lastLines(string(out), 3))
			}
			return nil
		},
		consume: func(boot, topic, group string, count int) ([]string, error) {
			out, err := command(60*time.Second, "", kcat, append(slices.Clone(f), "-b", boot, "-G", group, "-X", "auto.offset.reset=earliest",
				"-c", strconv.Itoa(count), "-q", "-f", "%s\n", topic)...)
			return lines(out), err
		},
		// kcat has no admin commands: the topic is deleted with franz-go's kadm, and kcat
		// (librdkafka's metadata) must then see it gone.
		delete: func(boot, topic string) error {
			if err := kadmDelete(boot, topic, kopts...); err != nil {
				return err
			}
			out, err := command(30*time.Second, "", kcat, append(slices.Clone(f), "-L", "-b", boot, "-t", topic, "-X", "allow.auto.create.topics=false")...)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "Unknown topic or partition") {
				return fmt.Errorf("kcat -L still lists the deleted topic %s: %s", topic, lastLines(out, 3))
			}
			return nil
		},
	}
}

// kadmDelete deletes topic with franz-go's kadm.
func kadmDelete(boot, topic string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(boot, ",")...)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).DeleteTopic(ctx, topic)
	return err
}

func TestKcat(t *testing.T) {
	kcat := needKcat(t)
	c := startCluster(t)
	runSuite(t, c, kcatClient(kcat))
}

// watched is a running kcat -G member whose output lines are collected as they come.
type watched struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	values  map[int]bool
	assigns []string // "% Group ... rebalanced ...: assigned: ..." lines
	changed chan struct{}
	done    chan struct{}
}

func startMember(t *testing.T, kcat, boot, group, topic string, extra ...string) *watched {
	t.Helper()
	args := append([]string{"-u", "-b", boot, "-G", group, "-X", "auto.offset.reset=earliest", "-f", "%s\n"}, extra...)
	cmd := exec.Command(kcat, append(args, topic)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	w := &watched{cmd: cmd, values: map[int]bool{}, changed: make(chan struct{}, 1), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	scan := func(r io.Reader, fn func(string)) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			w.mu.Lock()
			fn(sc.Text())
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}
	wg.Add(2)
	go scan(stdout, func(l string) {
		if n, err := strconv.Atoi(strings.TrimSpace(l)); err == nil {
			w.values[n] = true
		}
	})
	go scan(stderr, func(l string) {
		if strings.Contains(l, "rebalanced") && strings.Contains(l, "assigned") {
			w.assigns = append(w.assigns, l)
		}
	})
	go func() { wg.Wait(); cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	return w
}

// waitFor waits (up to d) until cond holds over the member's output.
func (w *watched) waitFor(t *testing.T, what string, d time.Duration, cond func(w *watched) bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok := cond(w)
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-w.done:
			w.mu.Lock()
			ok := cond(w)
			w.mu.Unlock()
			if !ok {
				t.Fatalf("kcat exited before %s", what)
			}
			return
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

func hasRange(start, end int) func(w *watched) bool {
	return func(w *watched) bool {
		for i := start; i < end; i++ {
			if !w.values[i] {
				return false
			}
		}
		return true
	}
}

// TestKcatTwoMembersRebalance runs two kcat -G members of one group: the second joins (the
// partitions are split), then leaves with SIGTERM (LeaveGroup): the first takes every
// partition back and reads what is produced afterwards.
func TestKcatTwoMembersRebalance(t *testing.T) {
	kcat := needKcat(t)
	c := startCluster(t)
	boot, topic, group := c.Bootstrap(), "kcat-rebalance", "kcat-two"
	createTopic(t, c, topic, 4)
	kc := kcatClient(kcat)
	if err := kc.produce(boot, topic, 0, 400); err != nil {
		t.Fatal(err)
	}
	a := startMember(t, kcat, boot, group, topic)
	a.waitFor(t, "member A reads the first 400", 60*time.Second, hasRange(0, 400))
	b := startMember(t, kcat, boot, group, topic)
	b.waitFor(t, "member B is assigned partitions", 60*time.Second, func(w *watched) bool {
		return len(w.assigns) > 0 && !strings.HasSuffix(w.assigns[len(w.assigns)-1], "assigned: ")
	})
	a.waitFor(t, "member A is assigned again", 60*time.Second, func(w *watched) bool { return len(w.assigns) >= 2 })
	if err := kc.produce(boot, topic, 400, 400); err != nil {
		t.Fatal(err)
	}
	both := func(start, end int) bool {
		a.mu.Lock()
		b.mu.Lock()
		defer a.mu.Unlock()
		defer b.mu.Unlock()
		for i := start; i < end; i++ {
			if !a.values[i] && !b.values[i] {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	for !both(400, 800) {
		if time.Now().After(deadline) {
			t.Fatal("the two members did not read records 400..799 between them")
		}
		select {
		case <-a.changed:
		case <-b.changed:
		case <-time.After(time.Second):
		}
	}
	b.mu.Lock()
	nb := 0
	for i := 400; i < 800; i++ {
		if b.values[i] {
			nb++
		}
	}
	b.mu.Unlock()
	if nb == 0 || nb == 400 {
		t.Fatalf("member B read %d of records 400..799: the partitions were not split (A: %q, B: %q)", nb, a.assigns, b.assigns)
	}
	// B leaves (kcat closes its consumer on SIGTERM: LeaveGroup); A gets every partition.
	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.done
	a.waitFor(t, "member A is assigned every partition", 60*time.Second, func(w *watched) bool { return len(w.assigns) >= 3 })
	if err := kc.produce(boot, topic, 800, 400); err != nil {
		t.Fatal(err)
	}
	a.waitFor(t, "member A reads records 800..1199 alone", 60*time.Second, hasRange(800, 1200))
	a.mu.Lock()
	t.Logf("member A assignments: %q", a.assigns)
	a.mu.Unlock()
	record("kcat -G (2 members)", operations[1], "works: split 4 partitions, rebalanced on LeaveGroup")
}

// groupCoordinatorStats finds the coordinator of group and returns its last rebalance
// durations (ms).
func groupCoordinatorStats(c *cluster.Cluster, group string) []float64 {
	for _, id := range c.BrokerIDs() {
		if g := c.Groups(id); g != nil {
			if st, ok := g.Stats(group); ok {
				return st.RebalanceMs
			}
		}
	}
	return nil
}
