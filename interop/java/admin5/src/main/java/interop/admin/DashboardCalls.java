package interop.admin;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.ConsumeMessageDirectlyResult;
import org.apache.rocketmq.remoting.protocol.body.ConsumerConnection;
import org.apache.rocketmq.remoting.protocol.body.ConsumerRunningInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.body.ProducerConnection;
import org.apache.rocketmq.remoting.protocol.body.TopicList;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The broker requests RocketMQ Dashboard makes behind its Cluster, Topic, Consumer, Producer and
 * Message pages, made with Apache's rocketmq-tools 5.3.3 DefaultMQAdminExt with the VIP channel on, as the
 * dashboard's default settings have it (broker requests go to listenPort - 2). A producer and a push
 * consumer of the same JVM (VIP channel on too) give the views something to show. Prints one JSON line per
 * call: {"call": name, "ok": bool, ...what it returned}; the Python test asserts them. Exit 0 when every
 * call ran (a failed call is a line with "ok": false and the error).
 *
 * <pre>
 * DashboardCalls NAMESRV TOPIC GROUP
 * </pre>
 */
public final class DashboardCalls {
    private DashboardCalls() {
    }

    public static void main(String[] args) {
        int status = 1;
        try {
            run(args);
            status = 0;
        } catch (Throwable e) {  // one line the test shows, and an exit: a client thread left must not hang the JVM
            System.out.println("{\"call\":\"main\",\"ok\":false,\"error\":" + json(String.valueOf(e)) + "}");
            e.printStackTrace();
        } finally {
            System.out.flush();
            System.exit(status);
        }
    }

    private static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        System.setProperty(ClientConfig.SEND_MESSAGE_WITH_VIP_CHANNEL_PROPERTY, "true");
        System.setProperty(MixAll.NAMESRV_ADDR_PROPERTY, namesrv);  // as the dashboard sets it
        DefaultMQProducer producer = new DefaultMQProducer(group + "_P");
        producer.setNamesrvAddr(namesrv);
        producer.setVipChannelEnabled(true);
        producer.setMqClientApiTimeout(15_000);  // a loaded test machine: the default 3 s is not always enough
        producer.start();
        CountDownLatch consumed = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setVipChannelEnabled(true);
        consumer.setMqClientApiTimeout(15_000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            consumed.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
        admin.setNamesrvAddr(namesrv);
        admin.setVipChannelEnabled(true);
        admin.setInstanceName("dashboard");
        admin.start();
        try {
            SendResult sent = producer.send(new Message(topic, "TagA", "dash-key", "dashboard".getBytes(StandardCharsets.UTF_8)));
            line("send", () -> Map.of("msgId", sent.getMsgId(), "offsetMsgId", sent.getOffsetMsgId()));
            // a long-running producer has heartbeated to the broker by the time anyone looks at it
            producer.getDefaultMQProducerImpl().getMqClientFactory().sendHeartbeatToAllBrokerWithLock();
            line("consumed", () -> Map.of("consumed", consumed.await(60, TimeUnit.SECONDS)));
            consumer.getDefaultMQPushConsumerImpl().persistConsumerOffset();  // as its next 5 s tick would
            calls(admin, namesrv, topic, group, sent, consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId(),
                consumer.getDefaultMQPushConsumerImpl());
        } finally {
            admin.shutdown();
            consumer.shutdown();
            producer.shutdown();
        }
    }

    private static void calls(DefaultMQAdminExt admin, String namesrv, String topic, String group, SendResult sent,
        String clientId, DefaultMQPushConsumerImpl consumerImpl) {
        line("clusterInfo", () -> {  // Cluster page: the brokers and each one's runtime info (over the VIP port)
            ClusterInfo info = admin.examineBrokerClusterInfo();
            Map<String, Object> out = new TreeMap<>();
            info.getBrokerAddrTable().forEach((name, data) -> data.getBrokerAddrs().forEach((id, addr) -> {
                try {
                    KVTable table = admin.fetchBrokerRuntimeStats(addr);
                    out.put(name + "/" + id, table.getTable().get("brokerVersionDesc"));
                } catch (Exception e) {
                    out.put(name + "/" + id, "error: " + e);
                }
            }));
            return Map.of("brokers", out);
        });
        line("topicList", () -> {  // Topic page: every topic, and the system ones from the NameServer then the broker
            TopicList all = admin.fetchAllTopicList();
            MQClientInstance instance = MQClientManager.getInstance().getOrCreateMQClientInstance(new ClientConfig());
            instance.start();
            TopicList sys = instance.getMQClientAPIImpl().getSystemTopicList(20_000L);
            return Map.of("topics", new TreeSet<>(all.getTopicList()), "system", new TreeSet<>(sys.getTopicList()));
        });
        line("topicStats", () -> {
            TopicStatsTable stats = admin.examineTopicStats(topic);
            long max = stats.getOffsetTable().values().stream().mapToLong(o -> o.getMaxOffset()).sum();
            return Map.of("queues", stats.getOffsetTable().size(), "messages", max);
        });
        line("consumerConnection", () -> {  // Consumer page
            ConsumerConnection conn = admin.examineConsumerConnectionInfo(group);
            List<String> ids = new ArrayList<>();
            conn.getConnectionSet().forEach(c -> ids.add(c.getClientId()));
            return Map.of("clients", ids, "clientId", clientId);
        });
        line("consumeStats", () -> {  // once the consumer's offset commit (oneway) has arrived
            ConsumeStats stats = admin.examineConsumeStats(group);
            for (int i = 0; i < 40 && (stats.getOffsetTable().isEmpty() || stats.computeTotalDiff() != 0); i++) {
                Thread.sleep(250);
                consumerImpl.persistConsumerOffset();
                stats = admin.examineConsumeStats(group);
            }
            return Map.of("queues", stats.getOffsetTable().size(), "diff", stats.computeTotalDiff());
        });
        line("runningInfo", () -> {
            ConsumerRunningInfo info = admin.getConsumerRunningInfo(group, clientId, false);
            return Map.of("subscriptions", info.getSubscriptionSet().size());
        });
        line("producerConnection", () -> {  // Producer page
            ProducerConnection conn = admin.examineProducerConnectionInfo(group + "_P", topic);
            return Map.of("producers", conn.getConnectionSet().size());
        });
        line("queryByKey", () -> {  // Message page: by key, by id
            List<MessageExt> found = admin.queryMessage(topic, "dash-key", 32, 0, Long.MAX_VALUE).getMessageList();
            return Map.of("found", found.size());
        });
        line("viewMessage", () -> {
            MessageExt msg = admin.viewMessage(topic, sent.getMsgId());
            return Map.of("body", new String(msg.getBody(), StandardCharsets.UTF_8));
        });
        line("consumeDirectly", () -> {
            ConsumeMessageDirectlyResult result = admin.consumeMessageDirectly(group, clientId, topic, sent.getMsgId());
            return Map.of("result", String.valueOf(result.getConsumeResult()));
        });
    }

    private static void line(String call, Callable<Map<String, ?>> body) {
        StringBuilder out = new StringBuilder("{\"call\":\"").append(call).append('"');
        try {
            Map<String, ?> fields = body.call();
            out.append(",\"ok\":true");
            for (Map.Entry<String, ?> e : new TreeMap<>(fields).entrySet()) {
                out.append(",\"").append(e.getKey()).append("\":").append(json(e.getValue()));
            }
        } catch (Exception e) {
            out.append(",\"ok\":false,\"error\":").append(json(String.valueOf(e)));
        }
        System.out.println(out.append('}'));
        System.out.flush();
    }

    private static String json(Object value) {
        if (value instanceof Number || value instanceof Boolean) {
            return String.valueOf(value);
        }
        if (value instanceof Iterable) {
            StringBuilder sb = new StringBuilder("[");
            for (Object item : (Iterable<?>) value) {
                sb.append(sb.length() > 1 ? "," : "").append(json(item));
            }
            return sb.append(']').toString();
        }
        if (value instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
                sb.append(sb.length() > 1 ? "," : "").append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return sb.append('}').toString();
        }
        String text = String.valueOf(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
        return "\"" + text + "\"";
    }
}
