"""Many partitions with confluent-kafka-python (librdkafka): create TOPIC with N partitions and
replication factor RF, produce one record to each partition (acks=all), and read them back.

usage: many_partitions.py BOOTSTRAP TOPIC N [RF]

librdkafka sends one ProduceRequest per partition, and a broker answers the requests of one
connection in order, as Kafka does: at 10,000 partitions every broker holds thousands of them
at once, each waiting for its followers. It prints the time each step took; it exits 1 when a
record was not acknowledged or not read back (librdkafka's default timeouts apply:
request.timeout.ms 30 s, message.timeout.ms 300 s).
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    boot, topic, n = argv[1], argv[2], int(argv[3])
    rf = int(argv[4]) if len(argv) == 5 else 3
    t0 = time.time()
    admin = AdminClient({"bootstrap.servers": boot})
    fs = admin.create_topics([NewTopic(topic, n, rf)], operation_timeout=300, request_timeout=300)
    fs[topic].result(600)
    while True:
        tm = admin.list_topics(topic, timeout=60).topics.get(topic)
        if tm is not None and tm.error is None and len(tm.partitions) == n and all(p.leader >= 0 for p in tm.partitions.values()):
            break
        time.sleep(0.2)
    print("create: %d partitions RF %d in %.1f s" % (n, rf, time.time() - t0), flush=True)

    errors, acked = [], [0]

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5})
    t1 = time.time()
    for i in range(n):
        p.produce(topic, value=("v%d" % i).encode(), partition=i, callback=on_delivery)
        p.poll(0)
    left = p.flush(600)
    print("produce: %d of %d acknowledged in %.1f s (%d not delivered, errors: %s)"
          % (acked[0], n, time.time() - t1, left, sorted(set(errors))[:3]), flush=True)

    c = Consumer({"bootstrap.servers": boot, "group.id": topic + "-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(n)])
    t2 = time.time()
    got = {}
    while len(got) < n and time.time() - t2 < 300:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got[m.partition()] = m.value().decode()
    c.close()
    wrong = [q for q, v in got.items() if v != "v%d" % q]
    print("consume: %d of %d partitions read back in %.1f s (%d wrong)" % (len(got), n, time.time() - t2, len(wrong)), flush=True)
    if acked[0] != n or len(got) != n or wrong:
        sys.exit("many partitions: %d of %d acknowledged, %d read back, %d wrong" % (acked[0], n, len(got), len(wrong)))


if __name__ == "__main__":
    try:
        main(sys.argv)
    except KafkaException as e:
        sys.exit("many partitions: %s" % e)
