package interop.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyContext;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * One consumer of a scenario's consumer group (mqadmin scenario run, {@code client: java:VERSION}):
 * a DefaultMQPushConsumer in clustering mode, one JSON line per consumption and per change of the
 * queues it was given.
 *
 * <pre>
 * ScenarioConsumer --namesrv "H:P;H:P" --group G --topic T [--topic T2 ...] [--expression "*"]
 *                  [--from last|first|timestamp] [--threads 20] [--batch 32] [--threshold 1000]
 *                  [--poll-ms 30000] [--heartbeat-ms 30000] [--persist-ms 5000] [--delay-ms 0]
 *                  [--failure-rate 0] [--api-timeout-ms 15000] [--access-key AK --secret-key SK]
 * </pre>
 * It builds and subscribes its consumer, prints {"event":"ready"} and waits for "go" on stdin, which
 * starts it (so the runner can have a JVM ready before the moment the scenario starts a consumer).
 * "stop" on stdin, or its end, shuts it down as an application does (offsets committed, unregistered)
 * and prints {"event":"stopped"}; a kill -9 is the runner's. Lines:
 * {"event":"consumed","t":WALL_MS,"topic":..,"broker":..,"queue":..,"offset":..,"msgId":UNIQ_KEY,
 * "storeMs":..,"outcome":"ok"|"retry","reconsume":N} (a retry is a RECONSUME_LATER answer, chosen with
 * --failure-rate), and {"event":"allocate","t":..,"topic":..,"all":[[broker,queue],..],"mine":[..]}
 * each time AllocateMessageQueueAveragely gives it other queues of a topic.
 */
public final class ScenarioConsumer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        double failureRate = Double.parseDouble(args.get("failure-rate", "0"));
        long delay = Long.parseLong(args.get("delay-ms", "0"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"), Clients.aclHook(args),
            new ReportingAllocation());
        Clients.configure(consumer, args, "consumer");
        consumer.setConsumeFromWhere(from(args.get("from", "last")));
        int threads = Integer.parseInt(args.get("threads", "20"));
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setPullBatchSize(Integer.parseInt(args.get("batch", "32")));
        consumer.setPullThresholdForQueue(Integer.parseInt(args.get("threshold", "1000")));
        consumer.setPollNameServerInterval(Integer.parseInt(args.get("poll-ms", "30000")));
        consumer.setHeartbeatBrokerInterval(Integer.parseInt(args.get("heartbeat-ms", "30000")));
        consumer.setPersistConsumerOffsetInterval(Integer.parseInt(args.get("persist-ms", "5000")));
        for (String topic : args.all("topic")) {
            consumer.subscribe(topic, args.get("expression", "*"));
        }
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            boolean retry = failureRate > 0 && ThreadLocalRandom.current().nextDouble() < failureRate;
            for (MessageExt message : messages) {
                if (delay > 0) {
                    sleep(delay);
                }
                consumed(message, context, retry);
            }
            return retry ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        Json.of("event", "ready").println();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (!"go".equals(stdin.readLine())) {
            System.exit(0);
        }
        consumer.start();
        Json.of("event", "started").put("t", WallClock.millis()).println();
        String line;
        while ((line = stdin.readLine()) != null && !"stop".equals(line)) {
            // only "stop" means something now
        }
        consumer.shutdown();
        Json.of("event", "stopped").put("t", WallClock.millis()).println();
        System.exit(0);
    }

    private static ConsumeFromWhere from(String name) {
        switch (name) {
            case "first": return ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
            case "timestamp": return ConsumeFromWhere.CONSUME_FROM_TIMESTAMP;
            default: return ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
        }
    }

    private static void consumed(MessageExt message, ConsumeConcurrentlyContext context, boolean retry) {
        String id = MessageClientIDSetter.getUniqID(message);
        MessageQueue mq = context.getMessageQueue();
        Json.of("event", "consumed").put("t", WallClock.millis()).put("topic", message.getTopic())
            .put("broker", mq.getBrokerName()).put("queue", mq.getQueueId()).put("offset", message.getQueueOffset())
            .put("msgId", id != null ? id : message.getMsgId()).put("storeMs", message.getStoreTimestamp())
            .put("outcome", retry ? "retry" : "ok").put("reconsume", message.getReconsumeTimes()).println();
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** AllocateMessageQueueAveragely, printing what it gives this consumer whenever that changes. */
    private static final class ReportingAllocation implements AllocateMessageQueueStrategy {
        private final AllocateMessageQueueAveragely averagely = new AllocateMessageQueueAveragely();
        private final Map<String, String> last = new HashMap<>();

        @Override
        public synchronized List<MessageQueue> allocate(String group, String currentCID, List<MessageQueue> mqAll,
                                                        List<String> cidAll) {
            List<MessageQueue> mine = averagely.allocate(group, currentCID, mqAll, cidAll);
            if (!mqAll.isEmpty()) {
                String topic = mqAll.get(0).getTopic();
                List<List<Object>> all = queues(mqAll);
                List<List<Object>> given = queues(mine);
                String seen = all + "/" + given;
                if (!seen.equals(last.put(topic, seen))) {
                    Json.of("event", "allocate").put("t", WallClock.millis()).put("topic", topic).put("all", all)
                        .put("mine", given).println();
                }
            }
            return mine;
        }

        private static List<List<Object>> queues(List<MessageQueue> queues) {
            List<List<Object>> out = new ArrayList<>();
            for (MessageQueue mq : queues) {
                out.add(List.of(mq.getBrokerName(), mq.getQueueId()));
            }
            return out;
        }

        @Override
        public String getName() {
            return "AVG";
        }
    }
}
