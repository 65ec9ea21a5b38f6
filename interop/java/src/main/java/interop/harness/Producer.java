package interop.harness;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

/**
 * A Java producer: sends each --msg and prints one JSON line per send.
 *
 * <pre>
 * Producer --namesrv H:P --topic T [--group G] --msg "body=a-0;tag=TagA;keys=k1 k2;prop.color=red" ...
 *          [--access-key AK --secret-key SK] [--timeout-ms 15000] [--linger-ms 0]
 * </pre>
 * With --linger-ms it stays connected that long after its sends (prints {"event":"lingering"}),
 * so that producerConnection has a live producer to show.
 * A --msg is fields {@code name=value} separated by ';': body, tag, keys (space separated, as
 * Message.setKeys), and prop.NAME for a user property. Exit 0 only if every send was SEND_OK.
 * A send that throws (a timeout on a busy machine) is tried again, up to --attempts times in all,
 * and each failed try is printed ({"event":"send-retry"}), so a retry never hides an error.
 */
public final class Producer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "interop_producer"), Clients.aclHook(args));
        Clients.configure(producer, args, "producer");
        producer.setSendMsgTimeout(Integer.parseInt(args.get("timeout-ms", "15000")));
        producer.start();
        boolean allOk = true;
        try {
            for (String spec : args.all("msg")) {
                Message message = message(args.get("topic"), spec);
                String body = new String(message.getBody(), StandardCharsets.UTF_8);
                try {
                    SendResult result = send(producer, message, Integer.parseInt(args.get("attempts", "3")));
                    allOk &= result.getSendStatus() == SendStatus.SEND_OK;
                    Json.of("event", "sent").put("body", body).put("status", result.getSendStatus().name())
                        .put("msgId", result.getMsgId()).put("offsetMsgId", result.getOffsetMsgId())
                        .put("broker", result.getMessageQueue().getBrokerName())
                        .put("queueId", result.getMessageQueue().getQueueId())
                        .put("queueOffset", result.getQueueOffset()).println();
                } catch (Exception e) {
                    allOk = false;
                    Clients.error("send-failed", e).put("body", body).println();
                }
            }
            long linger = Long.parseLong(args.get("linger-ms", "0"));
            if (linger > 0) {
                Json.of("event", "lingering").println();
                Thread.sleep(linger);
            }
        } finally {
            producer.shutdown();
        }
        System.exit(allOk ? 0 : 1);
    }

    private static SendResult send(DefaultMQProducer producer, Message message, int attempts) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                return producer.send(message);
            } catch (Exception e) {
                if (attempt >= attempts) {
                    throw e;
                }
                Clients.error("send-retry", e).put("attempt", attempt).println();
                Thread.sleep(500);
            }
        }
    }

    static Message message(String topic, String spec) {
        Map<String, String> fields = new LinkedHashMap<>();
        for (String part : spec.split(";")) {
            int eq = part.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("bad --msg field: " + part);
            }
            fields.put(part.substring(0, eq), part.substring(eq + 1));
        }
        Message message = new Message(topic, fields.getOrDefault("body", "").getBytes(StandardCharsets.UTF_8));
        if (fields.containsKey("tag")) {
            message.setTags(fields.get("tag"));
        }
        if (fields.containsKey("keys")) {
            message.setKeys(fields.get("keys"));
        }
        for (Map.Entry<String, String> field : fields.entrySet()) {
            if (field.getKey().startsWith("prop.")) {
                message.putUserProperty(field.getKey().substring(5), field.getValue());
            }
        }
        return message;
    }
}
