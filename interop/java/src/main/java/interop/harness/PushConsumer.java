package interop.harness;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A Java push consumer with a tag expression: prints {"event":"ready"} once started, then one JSON
 * line per message received (topic, tags, keys, body, every property, ids, queue and offset).
 *
 * <pre>
 * PushConsumer --namesrv H:P --topic T --group G [--expression "TagA || TagB"] --expect N
 *              [--seconds 60] [--linger-ms 0] [--access-key AK --secret-key SK]
 * </pre>
 * It stops after N messages (then waits --linger-ms more, so that a message that should not have
 * come would still show) or after --seconds; exit 0 only if N arrived.
 */
public final class PushConsumer {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        int expect = Integer.parseInt(args.get("expect"));
        CountDownLatch remaining = new CountDownLatch(expect);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"), Clients.aclHook(args), new AllocateMessageQueueAveragely());
        Clients.configure(consumer, args, "consumer");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(args.get("topic"), args.get("expression", "*"));
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                received(message);
                remaining.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Json.of("event", "ready").put("group", args.get("group")).println();
        boolean done = remaining.await(Long.parseLong(args.get("seconds", "60")), TimeUnit.SECONDS);
        Thread.sleep(Long.parseLong(args.get("linger-ms", "0")));
        consumer.shutdown();
        Json.of("event", "summary").put("ok", done).put("missing", remaining.getCount()).println();
        System.exit(done ? 0 : 1);
    }

    private static void received(MessageExt message) {
        Json.of("event", "received").put("topic", message.getTopic()).put("tags", message.getTags())
            .put("keys", message.getKeys()).put("body", new String(message.getBody(), StandardCharsets.UTF_8))
            .put("properties", message.getProperties()).put("msgId", message.getMsgId())
            .put("queueId", message.getQueueId()).put("queueOffset", message.getQueueOffset())
            .put("reconsumeTimes", message.getReconsumeTimes()).put("bornHost", String.valueOf(message.getBornHost()))
            .println();
    }
}
