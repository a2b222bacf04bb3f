"""The admin operations of the isrbench interop suite with confluent-kafka-python's AdminClient.

usage: confluent_admin.py delete-records     BOOTSTRAP TOPIC PARTITION OFFSET
       confluent_admin.py reassign           BOOTSTRAP TOPIC PARTITION REPLICAS (comma-separated)
       confluent_admin.py list-reassignments BOOTSTRAP TOPIC
       confluent_admin.py describe-config    BOOTSTRAP TOPIC NAME    (prints the value)
       confluent_admin.py group-offsets      BOOTSTRAP GROUP TOPIC   (prints "partition offset" lines)
Exit 3 means the installed version has no such call (printed on stderr).
"""
import sys

import confluent_kafka
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

# The AdminClient call each operation needs (confluent-kafka-python added delete_records in
# 2.4, list_consumer_group_offsets in 2.0; it has no partition reassignment call).
NEEDS = {
    "delete-records": "delete_records",
    "reassign": "alter_partition_reassignments",
    "list-reassignments": "list_partition_reassignments",
    "describe-config": "describe_configs",
    "group-offsets": "list_consumer_group_offsets",
}


def main(argv):
    op, boot = argv[1], argv[2]
    need = NEEDS.get(op)
    if need is None:
        sys.exit("unknown operation %s" % op)
    if not hasattr(AdminClient, need):
        print("unsupported: confluent-kafka-python %s has no AdminClient.%s" % (confluent_kafka.version()[0], need), file=sys.stderr)
        sys.exit(3)
    # The AdminClient must outlive its futures (see confluent_client.py).
    admin = AdminClient({"bootstrap.servers": boot})
    if op == "describe-config":
        topic, name = argv[3], argv[4]
        fs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        for _res, f in fs.items():
            entries = f.result(30)
            if name not in entries:
                sys.exit("no config %s in %s" % (name, sorted(entries)))
            print(entries[name].value)
    elif op == "delete-records":
        topic, partition, offset = argv[3], int(argv[4]), int(argv[5])
        fs = admin.delete_records([TopicPartition(topic, partition, offset)])
        for _tp, f in fs.items():
            f.result(30)
    elif op == "group-offsets":
        from confluent_kafka import ConsumerGroupTopicPartitions
        group, topic = argv[3], argv[4]
        fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        for _g, f in fs.items():
            for tp in f.result(30).topic_partitions:
                if tp.topic == topic:
                    print("%d %d" % (tp.partition, tp.offset))
    else:
        sys.exit("%s: not implemented by this script" % op)


if __name__ == "__main__":
    main(sys.argv)
