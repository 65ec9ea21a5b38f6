package interop.harness;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * A scenario's producer group on RocketMQ 5's Java gRPC client, rocketmq-client-java, through a Proxy
 * (mqadmin scenario run, {@code client: grpc-java:VERSION}): N Producers, each a client of its own,
 * sending synchronously from its own thread at a fixed rate; one JSON line per send.
 *
 * <pre>
 * GrpcScenarioProducer --endpoint H:P --topic T [--topic T2 ...] --producers N --rate R --seconds S
 *                      [--size 256] [--timeout-ms 3000] [--retries 2]
 * </pre>
 * The line protocol is ScenarioProducer's: {"event":"ready"}, "go" on stdin, one {"event":"send",...}
 * line per send ("status", "broker", "queue", "offset", "msgId" when stored, else "error"), then
 * {"event":"done"}; "stop" or the end of stdin stops the sends. --retries R is maxAttempts R+1. The
 * broker, queue and offset come from the client's receipt (its implementation's getters: the API's
 * SendReceipt names only the message id).
 */
public final class GrpcScenarioProducer {
    private GrpcScenarioProducer() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        int count = Integer.parseInt(args.get("producers"));
        double rate = Double.parseDouble(args.get("rate"));
        long seconds = (long) (Double.parseDouble(args.get("seconds")) * 1000);
        List<String> topics = args.all("topic");
        byte[] body = new byte[Integer.parseInt(args.get("size", "256"))];
        new Random().nextBytes(body);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(args.get("endpoint"))
            .setRequestTimeout(Duration.ofMillis(Long.parseLong(args.get("timeout-ms", "3000")))).build();
        List<Producer> producers = new ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                producers.add(start(provider, config, topics, Integer.parseInt(args.get("retries", "2")) + 1));
            }
            Json.of("event", "ready").println();
            if (!PacedSends.awaitGo()) {
                return;
            }
            PacedSends.run(count, rate, seconds, (index, n) ->
                send(index, provider, producers.get(index), topics.get((int) (n % topics.size())), body));
            Json.of("event", "done").println();
        } finally {
            for (Producer producer : producers) {
                producer.close();
            }
        }
        System.exit(0);
    }

    /** A started producer; a start that timed out (a starved machine) is tried again, 5 times in all. */
    private static Producer start(ClientServiceProvider provider, ClientConfiguration config, List<String> topics,
                                  int maxAttempts) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return provider.newProducerBuilder().setClientConfiguration(config)
                    .setTopics(topics.toArray(new String[0])).setMaxAttempts(maxAttempts).build();
            } catch (Exception e) {
                System.err.println("producer start, attempt " + attempt + ": " + PacedSends.chain(e));
                if (attempt >= 5) {
                    throw e;
                }
                Thread.sleep(1000);
            }
        }
    }

    private static void send(int index, ClientServiceProvider provider, Producer producer, String topic, byte[] body) {
        double t = WallClock.millis();
        long begin = System.nanoTime();
        Json line = Json.of("event", "send").put("p", index).put("t", t).put("topic", topic);
        try {
            SendReceipt receipt = producer.send(provider.newMessageBuilder().setTopic(topic).setBody(body).build());
            line.put("status", "SEND_OK").put("msgId", receipt.getMessageId().toString());
            Object queue = call(receipt, "getMessageQueue");
            line.put("broker", call(call(queue, "getBroker"), "getName")).put("queue", call(queue, "getQueueId"))
                .put("offset", call(receipt, "getOffset"));
        } catch (Exception e) {
            line.put("error", PacedSends.chain(e));
        }
        line.put("ms", (System.nanoTime() - begin) / 1e6).println();
    }

    /** A public getter of an implementation class (which may not be public itself). */
    static Object call(Object target, String getter) throws ReflectiveOperationException {
        Method method = target.getClass().getMethod(getter);
        method.setAccessible(true);
        return method.invoke(target);
    }
}
