"""One operation of the isrbench interop suite with confluent-kafka-python (librdkafka).

usage: confluent_client.py produce BOOTSTRAP TOPIC START COUNT
       confluent_client.py consume BOOTSTRAP TOPIC GROUP COUNT
       confluent_client.py delete  BOOTSTRAP TOPIC
consume prints the values read, one per line, after committing them and leaving the group.
"""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient


def security():
    """The librdkafka properties of ISRBENCH_INTEROP_CONFIG (key=value lines), or none."""
    path = os.environ.get("ISRBENCH_INTEROP_CONFIG")
    if not path:
        return {}
    conf = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, _, v = line.partition("=")
                conf[k.strip()] = v.strip()
    return conf


def produce(boot, topic, start, count):
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, **security()})
    for i in range(start, start + count):
        p.produce(topic, value=str(i).encode(), callback=on_delivery)
        p.poll(0)
    left = p.flush(30)
    if left or errors:
        sys.exit("produce: %d not delivered, errors: %s" % (left, errors[:3]))


def consume(boot, topic, group, count):
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 10000, **security()})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 60
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            print("consume: %s" % m.error(), file=sys.stderr)
            continue
        got.append(m.value().decode())
    if got:
        c.commit(asynchronous=False)
    c.close()
    print("\n".join(got))
    if len(got) < count:
        sys.exit("consume: read %d of %d records in 60 s" % (len(got), count))


def delete(boot, topic):
    # The AdminClient must outlive the future: a handle that is garbage-collected first
    # fails it with _DESTROY ("Handle is terminating").
    admin = AdminClient({"bootstrap.servers": boot, **security()})
    fs = admin.delete_topics([topic], operation_timeout=30)
    fs[topic].result(30)


def main(argv):
    op, boot, topic = argv[1], argv[2], argv[3]
    try:
        if op == "produce":
            produce(boot, topic, int(argv[4]), int(argv[5]))
        elif op == "consume":
            consume(boot, topic, argv[4], int(argv[5]))
        elif op == "delete":
            delete(boot, topic)
        else:
            sys.exit("unknown operation %r (produce, consume, delete)" % op)
    except KafkaException as e:
        sys.exit("%s: %s" % (op, e))


if __name__ == "__main__":
    main(sys.argv)
