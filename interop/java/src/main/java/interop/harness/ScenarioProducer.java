package interop.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
    private static volatile boolean stopped;

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
            BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            if (!"go".equals(stdin.readLine())) {
                return;
            }
            long end = System.nanoTime() + seconds * 1_000_000L;
            Thread watcher = new Thread(() -> watch(stdin), "stdin");
            watcher.setDaemon(true);
            watcher.start();
            List<Thread> senders = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                final int index = i;
                DefaultMQProducer producer = producers.get(i);
                Thread sender = new Thread(() -> produce(index, producer, topics, body, rate, end), "producer-" + i);
                senders.add(sender);
                sender.start();
            }
            for (Thread sender : senders) {
                sender.join();
            }
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

    /** Reads stdin after "go": "stop" or its end stops the sends early. */
    private static void watch(BufferedReader stdin) {
        try {
            String line;
            while ((line = stdin.readLine()) != null && !"stop".equals(line)) {
                // only "stop" means something now
            }
        } catch (Exception ignored) {
            // a broken stdin means the runner is gone: stop as well
        }
        stopped = true;
    }

    private static void produce(int index, DefaultMQProducer producer, List<String> topics, byte[] body, double rate,
                                long end) {
        long period = (long) (1_000_000_000L / rate);
        long next = System.nanoTime() + (long) (Math.random() * period);
        for (long n = 0; !stopped; n++) {
            long wait = next - System.nanoTime();
            if (wait > 0) {
                sleepNanos(wait);
            } else if (-wait > 1_000_000_000L) {
                next = System.nanoTime();  // more than a second behind: start over, do not burst
            }
            if (next >= end || stopped) {
                return;
            }
            send(index, producer, topics.get((int) (n % topics.size())), body);
            next += period;
        }
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
            line.put("error", chain(e)).put("code", Clients.responseCode(e));
            if (last != null) {
                line.put("broker", last.getBrokerName()).put("queue", last.getQueueId());
            }
        }
        line.put("ms", (System.nanoTime() - begin) / 1e6).put("attempts", ATTEMPTS.get()[0]).println();
    }

    /** The exception and its causes, "Class: message <- Class: message", for the runner to classify. */
    static String chain(Throwable error) {
        StringBuilder out = new StringBuilder();
        for (Throwable t = error; t != null && out.length() < 2000; t = t.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return out.toString();
    }

    private static void sleepNanos(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000L, (int) (nanos % 1_000_000L));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stopped = true;
        }
    }
}
