package interop.harness;

import java.util.List;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The checks the ACL and TLS clients share: ask the NameServer for a topic's route with a raw
 * GET_ROUTEINFO_BY_TOPIC (105), with --broker H:P ask that broker a client request of its own
 * (GET_MAX_OFFSET, 30: whether the broker itself takes or refuses this client's signature, even when
 * the NameServer refused the route), then send --count messages with a real producer, printing the
 * result code of each step. Refusals are results here, not failures: the exit status is 0 when
 * every step ran, whatever the codes, and the Python test asserts the codes.
 */
final class ClientChecks {
    private ClientChecks() {
    }

    static void run(Args args) throws Exception {
        RPCHook hook = Clients.aclHook(args);
        String topic = args.get("topic");
        RemotingProbe.request(args.get("namesrv"), 105, List.of("topic=" + topic), null, hook)
            .put("event", "route").println();
        String broker = args.get("broker", "");
        if (!broker.isEmpty()) {
            RemotingProbe.request(broker, 30, List.of("topic=" + topic, "queueId=0"), null, hook)
                .put("event", "broker").println();
        }
        int count = Integer.parseInt(args.get("count", "1"));
        if (count == 0) {
            return;
        }
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group", "interop_checks"), hook);
        Clients.configure(producer, args, "checks");
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                try {
                    SendResult result = producer.send(new Message(topic, "TagA", ("check-" + i).getBytes()));
                    Json.of("event", "sent").put("code", 0).put("status", result.getSendStatus().name())
                        .put("msgId", result.getMsgId()).println();
                } catch (Exception e) {
                    Clients.error("send-failed", e).println();
                }
            }
        } finally {
            producer.shutdown();
        }
    }
}
