package interop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient uses sarama's default config (its default protocol version) with acks=all.
func saramaClient() client { return saramaClientSec("sarama", nil) }

// saramaClientSec is saramaClient with its config's security set by sec (nil: none).
func saramaClientSec(name string, sec func(*sarama.Config)) client {
	config := func() *sarama.Config {
		cfg := sarama.NewConfig()
		cfg.ClientID = "isrbench-interop"
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Enable = false
		if sec != nil {
			sec(cfg)
		}
		return cfg
	}
	return client{
		name: name,
		produce: func(boot, topic string, start, count int) error {
			p, err := sarama.NewSyncProducer(strings.Split(boot, ","), config())
			if err != nil {
				return err
			}
			defer p.Close()
			var msgs []*sarama.ProducerMessage
			for i := start; i < start+count; i++ {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i))})
			}
			return p.SendMessages(msgs)
		},
		consume: func(boot, topic, group string, count int) ([]string, error) {
			cg, err := sarama.NewConsumerGroup(strings.Split(boot, ","), group, config())
			if err != nil {
				return nil, err
			}
			h := &saramaHandler{want: count, done: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				for ctx.Err() == nil {
					if err := cg.Consume(ctx, []string{topic}, h); err != nil && !errors.Is(err, context.Canceled) {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			select {
			case <-h.done:
			case <-ctx.Done():
			}
			cancel()
			cerr := <-errc
			if err := cg.Close(); err != nil && cerr == nil {
				cerr = err
			}
			got := h.values()
			if cerr == nil && len(got) < count {
				cerr = fmt.Errorf("read %d of %d records in 60 s", len(got), count)
			}
			return got, cerr
		},
		delete: func(boot, topic string) error {
			a, err := sarama.NewClusterAdmin(strings.Split(boot, ","), config())
			if err != nil {
				return err
			}
			defer a.Close()
			return a.DeleteTopic(topic)
		},
		deleteRecords: func(boot, topic string, partition int32, offset int64) error {
			a, err := sarama.NewClusterAdmin(strings.Split(boot, ","), config())
			if err != nil {
				return err
			}
			defer a.Close()
			return a.DeleteRecords(topic, map[int32]int64{partition: offset})
		},
		describeLogDirs: func(boot, topic string) (map[int32]map[string]int64, error) {
			a, err := sarama.NewClusterAdmin(strings.Split(boot, ","), config())
			if err != nil {
				return nil, err
			}
			defer a.Close()
			brokers, _, err := a.DescribeCluster()
			if err != nil {
				return nil, err
			}
			var ids []int32
			for _, b := range brokers {
				ids = append(ids, b.ID())
			}
			dirs, err := a.DescribeLogDirs(ids)
			if err != nil {
				return nil, err
			}
			out := map[int32]map[string]int64{}
			for id, ds := range dirs {
				out[id] = map[string]int64{}
				for _, d := range ds {
					if d.ErrorCode != sarama.ErrNoError {
						return nil, fmt.Errorf("broker %d dir %s: %v", id, d.Path, d.ErrorCode)
					}
					for _, t := range d.Topics {
						if t.Topic != topic {
							continue
						}
						for _, p := range t.Partitions {
							out[id][fmt.Sprintf("%s-%d", t.Topic, p.PartitionID)] = p.Size
						}
					}
				}
			}
			return out, nil
		},
	}
}

type saramaHandler struct {
	want int
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	got  []string
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.mu.Lock()
		full := len(h.got) >= h.want
		if !full {
			h.got = append(h.got, string(m.Value))
			s.MarkMessage(m, "")
			full = len(h.got) >= h.want
		}
		h.mu.Unlock()
		if full {
			s.Commit()
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func (h *saramaHandler) values() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func TestSarama(t *testing.T) {
	c := startCluster(t)
	runSuite(t, c, saramaClient())
}
