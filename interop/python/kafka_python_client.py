"""One operation of the isrbench interop suite with kafka-python (no api_version pinned:
the client probes the broker's versions itself).

usage: kafka_python_client.py produce BOOTSTRAP TOPIC START COUNT
       kafka_python_client.py consume BOOTSTRAP TOPIC GROUP COUNT
       kafka_python_client.py delete  BOOTSTRAP TOPIC
consume prints the values read, one per line, after committing them and leaving the group.
"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError


def produce(boot, topic, start, count):
    p = KafkaProducer(bootstrap_servers=boot.split(","), acks="all", linger_ms=5)
    futures = [p.send(topic, value=str(i).encode()) for i in range(start, start + count)]
    p.flush(30)
    for f in futures:
        f.get(timeout=30)
    p.close(10)


def consume(boot, topic, group, count):
    c = KafkaConsumer(topic, bootstrap_servers=boot.split(","), group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    deadline = time.time() + 60
    while len(got) < count and time.time() < deadline:
        for records in c.poll(timeout_ms=500).values():
            got.extend(r.value.decode() for r in records)
    if got:
        c.commit()
    c.close()
    print("\n".join(got))
    if len(got) < count:
        sys.exit("consume: read %d of %d records in 60 s" % (len(got), count))


def delete(boot, topic):
    a = KafkaAdminClient(bootstrap_servers=boot.split(","))
    a.delete_topics([topic], timeout_ms=30000)
    a.close()


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
    except KafkaError as e:
        sys.exit("%s: %r" % (op, e))


if __name__ == "__main__":
    main(sys.argv)
