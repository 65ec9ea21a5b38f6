package interop.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.rocketmq.client.hook.SendMessageContext;
import org.apache.rocketmq.client.hook.SendMessageHook;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A scenario's producer group in one JVM (mqadmin scenario run, {@code client: java:VERSION}):
 * N DefaultMQProducers, each a client instance of its own sending synchronously from its own thread
 * at a fixed rate, and one JSON line per send for the scenario's verdicts.
 *
 * <pre>
 * ScenarioProducer --namesrv "H:P;H:P" --group G --topic T [--topic T2 ...] --producers N --rate R
 *                  --seconds S [--size 256] [--timeout-ms 3000] [--retries 2] [--poll-ms 30000]
 *                  [--latency-fault false] [--api-timeout-ms 15000] [--access-key AK --secret-key SK]
 * </pre>
 * It starts its producers and prints {"event":"ready"}, then waits for a line "go" on stdin: the
 * sends run from then for --seconds (each producer at --rate per second, at a random phase, one send
 * at a time; a producer that fell more than a second behind starts over rather than bursting), or
 * until stdin says "stop" or ends (the scenario runner went away). Each send prints
 * {"event":"send","p":INDEX,"t":WALL_MS,"ms":LATENCY,"topic":..,"attempts":..} with, for a stored
 * message, "status", "broker", "queue", "offset" and "msgId" (its UNIQ_KEY), else "error" (the
 * exception and its causes) and "code", and the broker and queue of the last attempt. Attempts are
 * counted by a SendMessageHook, which Java calls before every try. {"event":"done"} ends the output.
 */
public final class ScenarioProducer {
    private static final ThreadLocal<int[]> ATTEMPTS = ThreadLocal.withInitial(() -> new int[1]);
    private static final ThreadLocal<MessageQueue[]> LAST_QUEUE = ThreadLocal.withInitial(() -> new MessageQueue[1]);

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        int count = Integer.parseInt(args.get("producers"));
        double rate = Double.parseDouble(args.get("rate"));
        long seconds = (long) (Double.parseDouble(args.get("seconds")) * 1000);
        List<String> topics = args.all("topic");
        byte[] body = new byte[Integer.parseInt(args.get("size", "256"))];
        new Random().nextBytes(body);
        List<DefaultMQProducer> producers = new ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                producers.add(start(args, i));
            }
            Json.of("event", "ready").println();
            if (!PacedSends.awaitGo()) {
                return;
            }
            PacedSends.run(count, rate, seconds, (index, n) ->
                send(index, producers.get(index), topics.get((int) (n % topics.size())), body));
            Json.of("event", "done").println();
        } finally {
            for (DefaultMQProducer producer : producers) {
                producer.shutdown();
            }
        }
        System.exit(0);
    }

    private static DefaultMQProducer start(Args args, int index) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group"), Clients.aclHook(args));
        Clients.configure(producer, args, "producer");
        producer.setInstanceName("scenario-producer-" + ProcessHandle.current().pid() + "-" + index);
        producer.setSendMsgTimeout(Integer.parseInt(args.get("timeout-ms", "3000")));
        producer.setRetryTimesWhenSendFailed(Integer.parseInt(args.get("retries", "2")));
        producer.setPollNameServerInterval(Integer.parseInt(args.get("poll-ms", "30000")));
        producer.setSendLatencyFaultEnable(Boolean.parseBoolean(args.get("latency-fault", "false")));
        producer.getDefaultMQProducerImpl().registerSendMessageHook(new SendMessageHook() {
            @Override
            public String hookName() {
                return "scenario-attempts";
            }

            @Override
            public void sendMessageBefore(SendMessageContext context) {
                ATTEMPTS.get()[0]++;
                LAST_QUEUE.get()[0] = context.getMq();
            }

            @Override
            public void sendMessageAfter(SendMessageContext context) {
            }
        });
        producer.start();
        return producer;
    }

    private static void send(int index, DefaultMQProducer producer, String topic, byte[] body) {
        ATTEMPTS.get()[0] = 0;
        LAST_QUEUE.get()[0] = null;
        double t = WallClock.millis();
        long begin = System.nanoTime();
        Json line = Json.of("event", "send").put("p", index).put("t", t).put("topic", topic);
        try {
            SendResult result = producer.send(new Message(topic, body));
            MessageQueue mq = result.getMessageQueue();
            line.put("status", result.getSendStatus().name()).put("broker", mq.getBrokerName())
                .put("queue", mq.getQueueId()).put("offset", result.getQueueOffset()).put("msgId", result.getMsgId());
        } catch (Exception e) {
            MessageQueue last = LAST_QUEUE.get()[0];
            line.put("error", PacedSends.chain(e)).put("code", Clients.responseCode(e));
            if (last != null) {
                line.put("broker", last.getBrokerName()).put("queue", last.getQueueId());
            }
        }
        line.put("ms", (System.nanoTime() - begin) / 1e6).put("attempts", ATTEMPTS.get()[0]).println();
    }
}
