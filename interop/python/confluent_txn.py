"""Transactions with confluent-kafka-python (librdkafka) against isrbench.

usage: confluent_txn.py txn    BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTIONS RECORDS GROUP
       confluent_txn.py zombie BOOTSTRAP TOPIC TRANSACTIONAL_ID
txn runs TRANSACTIONS transactions of RECORDS records each: even ones commit (values
c<i>-<j>), odd ones abort (values a<i>-<j>); the last committed one also commits offset
<i> of TOPIC-0 for GROUP with send_offsets_to_transaction. It prints the committed values,
one per line, then "group-offset <N>" as the group's committed offset of TOPIC-0 reads.
zombie starts a producer, opens a transaction, starts a second producer with the same
transactional id and prints "fenced: <error>" when the first one's commit is refused.
"""
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def producer(boot, txn_id):
    p = Producer({"bootstrap.servers": boot, "transactional.id": txn_id, "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def txn(boot, topic, txn_id, n, records, group):
    p = producer(boot, txn_id)
    cons = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
    committed = []
    for i in range(n):
        commit = i % 2 == 0
        p.begin_transaction()
        vals = [("c" if commit else "a") + "%d-%d" % (i, j) for j in range(records)]
        for v in vals:
            p.produce(topic, v.encode(), partition=0)
        if commit and i >= n - 2:
            p.send_offsets_to_transaction([TopicPartition(topic, 0, i)], cons.consumer_group_metadata(), 30)
        p.flush(30)  # on the broker before the end: an abort must have something to abort
        if commit:
            p.commit_transaction(30)
            committed += vals
        else:
            p.abort_transaction(30)
    for v in committed:
        print(v)
    got = cons.committed([TopicPartition(topic, 0)], timeout=30)
    print("group-offset %d" % got[0].offset)
    cons.close()


def zombie(boot, topic, txn_id):
    p1 = producer(boot, txn_id)
    p1.begin_transaction()
    p1.produce(topic, b"zombie", partition=0)
    p1.flush(30)
    p2 = producer(boot, txn_id)
    try:
        p1.commit_transaction(30)
    except KafkaException as e:
        print("fenced: %s" % e.args[0].name())
    else:
        print("not fenced")
    p2.begin_transaction()
    p2.produce(topic, b"after-zombie", partition=0)
    p2.commit_transaction(30)


def main(argv):
    op = argv[1]
    if op == "txn":
        txn(argv[2], argv[3], argv[4], int(argv[5]), int(argv[6]), argv[7])
    elif op == "zombie":
        zombie(argv[2], argv[3], argv[4])
    else:
        raise SystemExit("unknown operation %r" % op)


if __name__ == "__main__":
    main(sys.argv)
