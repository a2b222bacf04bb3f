"""One operation of the isrbench interop suite with kafka-python (no api_version pinned:
the client probes the broker's versions itself).

usage: kafka_python_client.py produce BOOTSTRAP TOPIC START COUNT
       kafka_python_client.py consume BOOTSTRAP TOPIC GROUP COUNT
       kafka_python_client.py delete  BOOTSTRAP TOPIC
consume prints the values read, one per line, after committing them and leaving the group.
"""
import os
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError


def security():
    """ISRBENCH_INTEROP_CONFIG's librdkafka properties as kafka-python's arguments, or none."""
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
    names = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
             "ssl.ca.location": "ssl_cafile"}
    return {names[k]: v for k, v in conf.items() if k in names}


def produce(boot, topic, start, count):
    p = KafkaProducer(bootstrap_servers=boot.split(","), acks="all", linger_ms=5, **security())
    futures = [p.send(topic, value=str(i).encode()) for i in range(start, start + count)]
    p.flush(30)
    for f in futures:
        f.get(timeout=30)
    p.close(10)


def consume(boot, topic, group, count):
    c = KafkaConsumer(topic, bootstrap_servers=boot.split(","), group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False, **security())
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
    a = KafkaAdminClient(bootstrap_servers=boot.split(","), **security())
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
