package interop.grpc;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * RocketMQ 5 flows through a Proxy with Apache's Java gRPC client (rocketmq-client-java), for the interop
 * tests, one after the other in one JVM, each against its own topic and group. Each prints one line
 * {@code RESULT {json}} with what it saw; the Python test decides what is right. Every wait is bounded.
 *
 * <pre>
 * GrpcFlows ENDPOINT simple:TOPIC:GROUP push:TOPIC:GROUP delay:TOPIC:GROUP:MS
 *   simple: 5 sent; all received; 3 acked, 1 made visible again in 1 s, 1 left to its 4 s invisible
 *           time; both come again with deliveryAttempt 2
 *   push:   3 sent; a push consumer fails the first delivery of "fail-me"
 *   delay:  one message with a delivery timestamp MS ahead
 * </pre>
 */
public final class GrpcFlows {
    private static final long DEADLINE_MS = 60_000;

    private GrpcFlows() {
    }

    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder().setEndpoints(endpoint)
            .setRequestTimeout(Duration.ofSeconds(10)).build();
        for (int i = 1; i < args.length; i++) {
            String[] spec = args[i].split(":");
            String flow = spec[0];
            String topic = spec[1];
            String group = spec[2];
            Map<String, Object> result;
            try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic).build()) {
                switch (flow) {
                    case "simple":
                        result = simple(provider, config, producer, topic, group);
                        break;
                    case "push":
                        result = push(provider, config, producer, topic, group);
                        break;
                    case "delay":
                        result = delay(provider, config, producer, topic, group, Long.parseLong(spec[3]));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown flow " + flow);
                }
            } catch (Exception e) {
                result = new LinkedHashMap<>();
                result.put("error", String.valueOf(e));
            }
            result.put("flow", flow);
            System.out.println("RESULT " + json(result));
            System.out.flush();
        }
        System.exit(0);
    }

    private static String send(ClientServiceProvider provider, Producer producer, String topic, String body,
        Long deliveryMs) throws Exception {
        var builder = provider.newMessageBuilder().setTopic(topic).setTag("TagA").setKeys("key-" + body)
            .setBody(body.getBytes(StandardCharsets.UTF_8));
        if (deliveryMs != null) {
            builder.setDeliveryTimestamp(deliveryMs);
        }
        Message message = builder.build();
        return producer.send(message).getMessageId().toString();
    }

    private static SimpleConsumer simpleConsumer(ClientServiceProvider provider, ClientConfiguration config,
        String topic, String group) throws Exception {
        return provider.newSimpleConsumerBuilder().setClientConfiguration(config).setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(3))
            .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .build();
    }

    private static List<MessageView> receive(SimpleConsumer consumer, Duration invisible) {
        try {
            return consumer.receive(16, invisible);
        } catch (Exception e) {  // the Proxy has not seen the client's settings yet: try again
            if (!String.valueOf(e).contains("settings")) {
                throw new IllegalStateException("receive failed", e);
            }
            System.err.println("receive: " + e);
            return Collections.emptyList();
        }
    }

    private static String body(MessageView view) {
        return StandardCharsets.UTF_8.decode(view.getBody()).toString();
    }

    private static Map<String, Object> simple(ClientServiceProvider provider, ClientConfiguration config,
        Producer producer, String topic, String group) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        List<String> sent = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            sent.add(send(provider, producer, topic, "s" + i, null));
        }
        out.put("sent", sent.size());
        try (SimpleConsumer consumer = simpleConsumer(provider, config, topic, group)) {
            Map<String, MessageView> first = new LinkedHashMap<>();
            long end = System.currentTimeMillis() + DEADLINE_MS;
            while (first.size() < 5 && System.currentTimeMillis() < end) {
                for (MessageView view : receive(consumer, Duration.ofSeconds(4))) {
                    first.put(body(view), view);
                }
            }
            out.put("first", new ArrayList<>(first.keySet()));
            List<Integer> attempts = new ArrayList<>();
            for (MessageView view : first.values()) {
                attempts.add(view.getDeliveryAttempt());
            }
            out.put("firstAttempts", attempts);
            for (String name : new String[] {"s0", "s1", "s2"}) {
                consumer.ack(first.get(name));
            }
            long changedAt = System.currentTimeMillis();  // before the change: the broker counts from its answer's time
            consumer.changeInvisibleDuration(first.get("s3"), Duration.ofSeconds(1));
            Map<String, Object> again = new LinkedHashMap<>();
            end = System.currentTimeMillis() + DEADLINE_MS;
            while (again.size() < 2 && System.currentTimeMillis() < end) {
                for (MessageView view : receive(consumer, Duration.ofSeconds(30))) {
                    Map<String, Object> seen = new LinkedHashMap<>();
                    seen.put("attempt", view.getDeliveryAttempt());
                    seen.put("afterMs", System.currentTimeMillis() - changedAt);
                    again.put(body(view), seen);
                    consumer.ack(view);
                }
            }
            out.put("again", again);
        }
        return out;
    }

    private static Map<String, Object> push(ClientServiceProvider provider, ClientConfiguration config,
        Producer producer, String topic, String group) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        ConcurrentLinkedQueue<String> deliveries = new ConcurrentLinkedQueue<>();
        Map<String, Integer> attempts = new ConcurrentHashMap<>();
        try (PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Collections.singletonMap(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .setMessageListener(view -> {
                String body = body(view);
                deliveries.add(body + "#" + view.getDeliveryAttempt());
                attempts.merge(body, 1, Integer::sum);
                return body.equals("fail-me") && view.getDeliveryAttempt() == 1 ? ConsumeResult.FAILURE
                    : ConsumeResult.SUCCESS;
            }).build()) {
            Thread.sleep(2000);  // the consumer's first assignment query
            for (String body : new String[] {"p0", "fail-me", "p2"}) {
                send(provider, producer, topic, body, null);
            }
            long end = System.currentTimeMillis() + DEADLINE_MS;
            while (!(attempts.getOrDefault("fail-me", 0) >= 2 && attempts.containsKey("p0") && attempts.containsKey("p2"))
                && System.currentTimeMillis() < end) {
                Thread.sleep(100);
            }
            Thread.sleep(1000);  // nothing more may come
        }
        out.put("deliveries", new ArrayList<>(deliveries));
        return out;
    }

    private static Map<String, Object> delay(ClientServiceProvider provider, ClientConfiguration config,
        Producer producer, String topic, String group, long delayMs) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        try (SimpleConsumer consumer = simpleConsumer(provider, config, topic, group)) {
            receive(consumer, Duration.ofSeconds(10));  // the group's start position, before the message exists
            long deliverAt = System.currentTimeMillis() + delayMs;
            send(provider, producer, topic, "later", deliverAt);
            long end = System.currentTimeMillis() + DEADLINE_MS;
            while (System.currentTimeMillis() < end && !out.containsKey("receivedAt")) {
                for (MessageView view : receive(consumer, Duration.ofSeconds(10))) {
                    out.put("receivedAt", System.currentTimeMillis());
                    out.put("body", body(view));
                    consumer.ack(view);
                }
            }
            out.put("deliverAt", deliverAt);
        }
        return out;
    }

    private static String json(Object value) {
        if (value instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        if (value instanceof List) {
            StringBuilder sb = new StringBuilder("[");
            for (Object item : (List<?>) value) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(json(item));
            }
            return sb.append(']').toString();
        }
        if (value instanceof Number || value instanceof Boolean) {
            return String.valueOf(value);
        }
        return "\"" + String.valueOf(value).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
