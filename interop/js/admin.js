// The admin operations of the isrbench interop suite with kafkajs' admin client.
//
// usage: node admin.js delete-records     BOOTSTRAP TOPIC PARTITION OFFSET
//        node admin.js reassign           BOOTSTRAP TOPIC PARTITION REPLICAS (comma-separated)
//        node admin.js list-reassignments BOOTSTRAP TOPIC   (prints "partition: replicas adding removing")
//        node admin.js describe-config    BOOTSTRAP TOPIC NAME   (prints the value)
//        node admin.js group-offsets      BOOTSTRAP GROUP TOPIC  (prints "partition offset" lines)
//        node admin.js describe-log-dirs  ...  exits 3: kafkajs has no describeLogDirs
// Exit 3 means the operation is not in this kafkajs version.
'use strict';
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

async function main() {
  const [op, boot, a, b, c] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'isrbench-interop-admin', brokers: boot.split(','), logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  if (typeof admin.describeLogDirs !== 'function' && op === 'describe-log-dirs') {
    console.error('unsupported: kafkajs ' + require('kafkajs/package.json').version + ' has no describeLogDirs');
    process.exit(3);
  }
  await admin.connect();
  try {
    if (op === 'delete-records') {
      // deleteTopicRecords reads the leaders from the admin's metadata cache without loading
      // it (KafkaJSTopicMetadataNotLoaded otherwise): load the topic first.
      await admin.fetchTopicMetadata({ topics: [a] });
      await admin.deleteTopicRecords({ topic: a, partitions: [{ partition: Number(b), offset: c }] });
    } else if (op === 'reassign') {
      await admin.alterPartitionReassignments({
        topics: [{ topic: a, partitionAssignment: [{ partition: Number(b), replicas: c.split(',').map(Number) }] }],
      });
    } else if (op === 'list-reassignments') {
      const res = await admin.listPartitionReassignments({ topics: [{ topic: a, partitions: [0] }] });
      for (const t of res.topics) {
        for (const p of t.partitions) {
          console.log(`${p.partition}: ${p.replicas.join(',')} ${p.addingReplicas.join(',')} ${p.removingReplicas.join(',')}`);
        }
      }
    } else if (op === 'describe-config') {
      const res = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: a, configNames: [b] }] });
      const entry = res.resources[0].configEntries.find((e) => e.configName === b);
      if (!entry) throw new Error(`no config ${b} in ${JSON.stringify(res.resources[0])}`);
      console.log(entry.configValue);
    } else if (op === 'group-offsets') {
      const res = await admin.fetchOffsets({ groupId: a, topics: [b] });
      for (const t of res) {
        for (const p of t.partitions) console.log(`${p.partition} ${p.offset}`);
      }
    } else {
      throw new Error(`unknown operation ${op}`);
    }
  } finally {
    await admin.disconnect();
  }
}

main().then(() => process.exit(0), (e) => { console.error(`${process.argv[2]}: ${e && e.stack || e}`); process.exit(1); });
