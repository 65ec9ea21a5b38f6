'use strict';
/*
 * Interop check with ali-ons, a pure-JavaScript RocketMQ remoting client (npm), against
 * mqnamesrv + mqbroker-stub. Run by ali_ons_check.sh, which installs ali-ons in a temp dir.
 *
 * usage: node ali_ons_check.js NAMESRV_ADDR [TOPIC]
 *
 * 1. producer: route of TBW102, UPDATE_AND_CREATE_TOPIC (17) on the broker it names, then
 *    waits until the NameServer routes the new topic;
 * 2. push consumer subscribed to tag TagA (heartbeat, rebalance, long-polling pulls);
 * 3. producer sends 3 TagA and 3 TagB messages (SEND_MESSAGE_V2 310): each must be SEND_OK;
 * 4. the consumer must receive exactly the TagA ones (tag filtering on the broker and client);
 *    it fails the first delivery of a-1 (ACTION_RETRY -> CONSUMER_SEND_MSG_BACK 36), which
 *    must come back through the group's %RETRY% topic.
 * Prints one JSON line per event and a summary line; exits 0 only if all of the above held.
 */
const { Producer, Consumer, Message } = require('ali-ons');

const nameSrv = process.argv[2];
const topic = process.argv[3] || `InteropTopic${Date.now() % 100000}`;
// ali-ons asks an HTTP address server only when no nameSrv is given; we always give one.
const httpclient = { request: async () => { throw new Error('no address server: nameSrv is given'); } };
// Producer and consumer share one client instance, which takes its timers from the first one made.
const common = { httpclient, nameSrv, accessKeyId: 'none', accessKeySecret: 'none', pollNameServerInteval: 2000, rebalanceInterval: 2000 };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const log = obj => console.log(JSON.stringify(obj));

async function main() {
  const producer = new Producer({ ...common, producerGroup: 'PG_INTEROP' });
  await producer.ready();
  const api = producer._mqClient;
  const tbw = await api.getDefaultTopicRouteInfoFromNameServer('TBW102', 3000);
  const brokerAddr = tbw.brokerDatas[0].brokerAddrs['0'];
  await api.createTopic(brokerAddr, 'TBW102', { topicName: topic, readQueueNums: 4, writeQueueNums: 4, perm: 6,
    topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: false }, 3000);
  log({ event: 'topic created', topic, broker: brokerAddr });
  for (let i = 0; ; i++) {
    try { await api.getTopicRouteInfoFromNameServer(topic, 3000); break; } catch (err) {
      if (i > 50) throw new Error(`topic ${topic} not routable: ${err.message}`);
      await sleep(100);
    }
  }

  const received = [];
  const sentAt = new Map();
  let failedOnce = false;
  const consumer = new Consumer({ ...common, consumerGroup: 'CG_INTEROP' });
  // Expected, not failures: QUERY_NOT_FOUND for a new group's offsets (the client then starts from the
  // max offset) and no route yet for %RETRY%CG_INTEROP (the broker creates it on the first heartbeat).
  const expected = /maybe this group consumer boot first|topic: %RETRY%/;
  consumer.on('error', err => { if (!expected.test(err.message)) log({ event: 'consumer error', error: err.message }); });
  consumer.subscribe(topic, 'TagA', async msg => {
    const body = msg.body.toString();
    const item = { event: 'received', body, tags: msg.tags, msgId: msg.msgId, queueId: msg.queueId,
      queueOffset: msg.queueOffset, reconsumeTimes: msg.reconsumeTimes, latencyMs: Date.now() - (sentAt.get(body) || Date.now()) };
    received.push(item);
    log(item);
    if (body === 'a-1' && !failedOnce) {
      failedOnce = true;
      log({ event: 'failing on purpose (ACTION_RETRY)', body });
      return Consumer.ACTION_RETRY;
    }
  });
  await consumer.ready();
  await sleep(3000); // rebalanced, pulls held by the broker (long polling)

  const results = [];
  for (let i = 0; i < 3; i++) {
    for (const [prefix, tag] of [[ 'a', 'TagA' ], [ 'b', 'TagB' ]]) {
      const body = `${prefix}-${i}`;
      const msg = new Message(topic, tag, body);
      msg.keys = [ `key-${body}` ];
      sentAt.set(body, Date.now());
      const r = await producer.send(msg);
      results.push(r);
      log({ event: 'sent', body, tag, sendStatus: r.sendStatus, msgId: r.msgId, queueId: r.messageQueue.queueId, queueOffset: r.queueOffset });
    }
  }

  const want = [ 'a-0', 'a-1', 'a-1', 'a-2' ];
  const deadline = Date.now() + 30000;
  const bodies = () => received.map(r => r.body).sort();
  while (Date.now() < deadline && JSON.stringify(bodies()) !== JSON.stringify(want)) await sleep(100);
  await sleep(1000); // anything unexpected (a TagB message, a duplicate) would arrive now
  const redelivered = received.filter(r => r.body === 'a-1' && r.reconsumeTimes > 0);
  const ok = results.every(r => r.sendStatus === 'SEND_OK') && JSON.stringify(bodies()) === JSON.stringify(want) &&
    redelivered.length === 1;
  log({ event: 'summary', ok, sent: results.length, sendOk: results.filter(r => r.sendStatus === 'SEND_OK').length,
    received: bodies(), redeliveredFromRetryTopic: redelivered.length });
  await consumer.close();
  await producer.close();
  process.exit(ok ? 0 : 1);
}

setTimeout(() => { log({ event: 'summary', ok: false, error: 'timed out after 60 s' }); process.exit(1); }, 60000).unref();
main().catch(err => { log({ event: 'summary', ok: false, error: String(err && err.stack || err) }); process.exit(1); });
