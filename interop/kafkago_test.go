package interop

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func kafkaGoClient() client {
	return client{
		name: "segmentio/kafka-go",
		produce: func(boot, topic string, start, count int) error {
			w := &kafka.Writer{Addr: kafka.TCP(strings.Split(boot, ",")...), Topic: topic, RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}}
			defer w.Close()
			var msgs []kafka.Message
			for i := start; i < start+count; i++ {
				msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i))})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return w.WriteMessages(ctx, msgs...)
		},
		consume: func(boot, topic, group string, count int) ([]string, error) {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(boot, ","), GroupID: group, Topic: topic,
				StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var got []string
			var err error
			for len(got) < count {
				var m kafka.Message
				if m, err = r.FetchMessage(ctx); err != nil {
					err = fmt.Errorf("after %d of %d records: %w", len(got), count, err)
					break
				}
				got = append(got, string(m.Value))
				if err = r.CommitMessages(ctx, m); err != nil {
					break
				}
			}
			if cerr := r.Close(); cerr != nil && err == nil {
				err = cerr
			}
			return got, err
		},
		delete: func(boot, topic string) error {
			conn, err := kafka.Dial("tcp", strings.Split(boot, ",")[0])
			if err != nil {
				return err
			}
			defer conn.Close()
			ctrl, err := conn.Controller()
			if err != nil {
				return err
			}
			cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
			if err != nil {
				return err
			}
			defer cc.Close()
			return cc.DeleteTopics(topic)
		},
	}
}

func TestKafkaGo(t *testing.T) {
	c := startCluster(t)
	runSuite(t, c, kafkaGoClient())
}
