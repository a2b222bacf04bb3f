// One operation of the isrbench interop suite with kafkajs.
//
// usage: node client.js produce BOOTSTRAP TOPIC START COUNT
//        node client.js consume BOOTSTRAP TOPIC GROUP COUNT
//        node client.js delete  BOOTSTRAP TOPIC
//        node client.js txn     BOOTSTRAP TOPIC TRANSACTIONAL_ID GROUP
//        node client.js zombie  BOOTSTRAP TOPIC TRANSACTIONAL_ID
// txn runs 6 transactions of 2 records to partition 0: even ones commit (values k<i>-a, k<i>-b),
// odd ones abort; the last committed one also commits offset 3 of TOPIC-0 for GROUP
// (sendOffsets); it prints the committed values. zombie opens a transaction, starts a second
// producer with the same transactional id and prints "fenced: <error>" when the first one's
// commit is refused; the second then commits the value "after-zombie".
// consume prints the values read, one per line, after committing them and leaving the group.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [op, boot, topic, a, b] = process.argv.slice(2);
  // Security from the environment: ISRBENCH_INTEROP_CA (a PEM CA file: TLS) and
  // ISRBENCH_INTEROP_SASL (mechanism:user:password).
  const opts = { clientId: 'isrbench-interop', brokers: boot.split(','), logLevel: logLevel.ERROR };
  if (process.env.ISRBENCH_INTEROP_CA) {
    opts.ssl = { ca: [require('fs').readFileSync(process.env.ISRBENCH_INTEROP_CA, 'utf8')] };
  }
  if (process.env.ISRBENCH_INTEROP_SASL) {
    const [mechanism, username, ...pw] = process.env.ISRBENCH_INTEROP_SASL.split(':');
    opts.sasl = { mechanism, username, password: pw.join(':') };
  }
  const kafka = new Kafka(opts);
  if (op === 'produce') {
    const start = Number(a), count = Number(b);
    const p = kafka.producer();
    await p.connect();
    const messages = [];
    for (let i = start; i < start + count; i++) messages.push({ value: String(i) });
    await p.send({ topic, acks: -1, messages });
    await p.disconnect();
  } else if (op === 'consume') {
    const count = Number(b);
    const c = kafka.consumer({ groupId: a, sessionTimeout: 10000, heartbeatInterval: 1000 });
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    const got = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${count} records in 60 s`)), 60000);
      c.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (got.length >= count) return;
          got.push(message.value.toString());
          await c.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
          if (got.length >= count) { clearTimeout(timer); resolve(); }
        },
      }).catch(reject);
    });
    await c.disconnect();
    console.log(got.join('\n'));
  } else if (op === 'delete') {
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [topic], timeout: 30000 });
    await admin.disconnect();
  } else if (op === 'txn') {
    const p = kafka.producer({ transactionalId: a, maxInFlightRequests: 1, idempotent: true });
    await p.connect();
    const committed = [];
    for (let i = 0; i < 6; i++) {
      const commit = i % 2 === 0;
      const vals = [`k${i}-a`, `k${i}-b`];
      const t = await p.transaction();
      await t.send({ topic, acks: -1, messages: vals.map((v) => ({ value: v, partition: 0 })) });
      if (i === 4) {
        await t.sendOffsets({ consumerGroupId: b, topics: [{ topic, partitions: [{ partition: 0, offset: '3' }] }] });
      }
      if (commit) {
        await t.commit();
        committed.push(...vals);
      } else {
        await t.abort();
      }
    }
    await p.disconnect();
    console.log(committed.join('\n'));
  } else if (op === 'zombie') {
    const p1 = kafka.producer({ transactionalId: a, maxInFlightRequests: 1, idempotent: true });
    await p1.connect();
    const t1 = await p1.transaction();
    await t1.send({ topic, acks: -1, messages: [{ value: 'zombie', partition: 0 }] });
    const p2 = kafka.producer({ transactionalId: a, maxInFlightRequests: 1, idempotent: true });
    await p2.connect();
    const t2 = await p2.transaction();
    try {
      await t1.commit();
      console.log('not fenced');
    } catch (e) {
      console.log(`fenced: ${e.type || e.name}`);
    }
    await t2.send({ topic, acks: -1, messages: [{ value: 'after-zombie', partition: 0 }] });
    await t2.commit();
    await p1.disconnect().catch(() => {});
    await p2.disconnect();
  } else {
    throw new Error(`unknown operation ${op} (produce, consume, delete, txn, zombie)`);
  }
}

main().then(() => process.exit(0), (e) => { console.error(`${process.argv[2]}: ${e && e.stack || e}`); process.exit(1); });
