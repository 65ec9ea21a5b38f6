package interop.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageView;

/**
 * One consumer of a scenario's consumer group on rocketmq-client-java through a Proxy (mqadmin scenario
 * run, {@code client: grpc-java:VERSION}): a PushConsumer, or with {@code --api simple} a SimpleConsumer
 * receiving and acking in a loop.
 *
 * <pre>
 * GrpcScenarioConsumer --endpoint H:P --group G --topic T [--topic T2 ...] [--expression "*"]
 *                      [--api push|simple] [--threads 20] [--delay-ms 0] [--failure-rate 0]
 *                      [--invisible-s 15] [--timeout-ms 3000]
 * </pre>
 * It prints {"event":"ready"}, builds (starts) its consumer on "go" (up to 5 attempts, each failure a
 * {"event":"start","error":..} line: a start can time out on a starved machine), and on "stop" or the end of stdin
 * closes it (at most 8 s) and prints {"event":"stopped","closed":BOOL}. One line per message handed to the application:
 * {"event":"consumed","t":WALL_MS,"msgId":..,"topic":..,"handle":RECEIPT_HANDLE,"attempt":N,
 * "storeMs":BORN_MS,"outcome":"ok"|"retry"} (retry: failed at --failure-rate; a push consumer answers
 * FAILURE, a simple consumer leaves it to its invisible time), with "ack" for a simple consumer (ok or
 * the error). A simple consumer's failed receive prints {"event":"receive","error":..}.
 */
public final class GrpcScenarioConsumer {
    private static final long CLOSE_MS = 8_000;
    private static final int START_ATTEMPTS = 5;
    private static volatile boolean stopped;

    private GrpcScenarioConsumer() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        double failureRate = Double.parseDouble(args.get("failure-rate", "0"));
        long delay = (long) Double.parseDouble(args.get("delay-ms", "0"));
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(args.get("endpoint"))
            .setRequestTimeout(Duration.ofMillis(Long.parseLong(args.get("timeout-ms", "3000")))).build();
        Map<String, FilterExpression> subscriptions = new HashMap<>();
        for (String topic : args.all("topic")) {
            subscriptions.put(topic, new FilterExpression(args.get("expression", "*"), FilterExpressionType.TAG));
        }
        Json.of("event", "ready").println();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (!"go".equals(stdin.readLine())) {
            System.exit(0);
        }
        AutoCloseable consumer = null;
        Thread receiver = null;
        boolean simple = "simple".equals(args.get("api", "push"));
        for (int attempt = 1; consumer == null; attempt++) {
            try {
                consumer = simple ? simpleConsumer(provider, config, args, subscriptions)
                    : pushConsumer(provider, config, args, subscriptions, delay, failureRate);
            } catch (Exception e) {  // a start that timed out on a starved machine (its settings, its routes)
                Json.of("event", "start").put("t", WallClock.millis()).put("attempt", attempt)
                    .put("error", PacedSends.chain(e)).println();
                if (attempt >= START_ATTEMPTS) {
                    throw e;
                }
                Thread.sleep(1000);
            }
        }
        if (simple) {
            SimpleConsumer receiving = (SimpleConsumer) consumer;
            Duration invisible = Duration.ofMillis((long) (Double.parseDouble(args.get("invisible-s", "15")) * 1000));
            receiver = new Thread(() -> receive(receiving, invisible, delay, failureRate), "receiver");
            receiver.setDaemon(true);
            receiver.start();
        }
        String line;
        while ((line = stdin.readLine()) != null && !"stop".equals(line)) {
            // only "stop" means something now
        }
        stopped = true;
        if (receiver != null) {
            receiver.join(10_000);
        }
        // close() waits for the receives in flight (long polls of up to 30 s): bounded here, so that the
        // runner's stop is an application's shutdown and not a kill
        AutoCloseable started = consumer;
        Thread closer = new Thread(() -> {
            try {
                started.close();
            } catch (Exception e) {
                System.err.println("close: " + e);
            }
        }, "closer");
        closer.setDaemon(true);
        closer.start();
        closer.join(CLOSE_MS);
        Json.of("event", "stopped").put("closed", !closer.isAlive()).println();
        System.exit(0);
    }

    private static SimpleConsumer simpleConsumer(ClientServiceProvider provider, ClientConfiguration config, Args args,
                                                 Map<String, FilterExpression> subscriptions) throws Exception {
        return provider.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(args.get("group"))
            .setAwaitDuration(Duration.ofSeconds(5)).setSubscriptionExpressions(subscriptions).build();
    }

    private static PushConsumer pushConsumer(ClientServiceProvider provider, ClientConfiguration config, Args args,
                                             Map<String, FilterExpression> subscriptions, long delay,
                                             double failureRate) throws Exception {
        return provider.newPushConsumerBuilder().setClientConfiguration(config).setConsumerGroup(args.get("group"))
            .setSubscriptionExpressions(subscriptions)
            .setConsumptionThreadCount(Integer.parseInt(args.get("threads", "20")))
            .setMessageListener(view -> {
                if (work(delay, failureRate)) {
                    consumed(view, "ok").println();
                    return ConsumeResult.SUCCESS;
                }
                consumed(view, "retry").println();
                return ConsumeResult.FAILURE;
            }).build();
    }

    /** The application's work on one message: whether it succeeded. */
    private static boolean work(long delay, double failureRate) {
        if (delay > 0) {
            try {
                Thread.sleep(delay);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return ThreadLocalRandom.current().nextDouble() >= failureRate;
    }

    private static Json consumed(MessageView view, String outcome) {
        Json line = Json.of("event", "consumed").put("t", WallClock.millis()).put("msgId", view.getMessageId().toString())
            .put("topic", view.getTopic()).put("attempt", view.getDeliveryAttempt()).put("outcome", outcome)
            .put("storeMs", view.getBornTimestamp());
        try {
            line.put("handle", GrpcScenarioProducer.call(view, "getReceiptHandle"));
        } catch (ReflectiveOperationException e) {
            line.put("handle", "");
        }
        return line;
    }

    private static void receive(SimpleConsumer consumer, Duration invisible, long delay, double failureRate) {
        while (!stopped) {
            List<MessageView> views;
            try {
                views = consumer.receive(16, invisible);
            } catch (Exception e) {
                Json.of("event", "receive").put("t", WallClock.millis()).put("error", PacedSends.chain(e))
                    .println();
                try {
                    Thread.sleep(500);
                } catch (InterruptedException ie) {
                    return;
                }
                continue;
            }
            Json.of("event", "receive").put("t", WallClock.millis()).put("n", views.size()).println();
            for (MessageView view : views) {
                if (stopped) {
                    return;
                }
                if (!work(delay, failureRate)) {
                    consumed(view, "retry").println();  // left to its invisible time: it comes again
                    continue;
                }
                String ack = "ok";
                try {
                    consumer.ack(view);
                } catch (Exception e) {
                    ack = PacedSends.chain(e);  // the broker may be gone: it comes again
                }
                consumed(view, "ok").put("ack", ack).println();
            }
        }
    }
}
