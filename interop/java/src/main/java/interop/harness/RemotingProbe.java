package interop.harness;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * One raw remoting request through Java's own NettyRemotingClient, so that what reaches the server
 * is exactly what a Java client sends (its header encoding, its ACL signature, its TLS handshake).
 * Header fields are set as ext fields because the header classes moved package between 4.9.7 and
 * 5.3.3.
 *
 * <pre>
 * RemotingProbe --addr H:P [--addr H2:P2 ...] --code 105 [--ext topic=T ...] [--body TEXT]
 *               [--access-key AK --secret-key SK]
 * </pre>
 * With several --addr, the same request goes to each in turn, one JSON line each (one JVM start
 * for all). TLS follows -Dtls.enable=true, as in every Java client.
 */
public final class RemotingProbe {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        for (String addr : args.all("addr")) {
            request(addr, Integer.parseInt(args.get("code")), args.all("ext"), args.get("body", null),
                Clients.aclHook(args)).put("addr", addr).println();
        }
        System.exit(0);
    }

    /** Sends one request and describes the response (or the failure) as a JSON object. */
    static Json request(String addr, int code, List<String> ext, String body, RPCHook hook) {
        NettyClientConfig config = new NettyClientConfig();
        config.setUseTLS(Boolean.parseBoolean(System.getProperty("tls.enable", "false")));
        NettyRemotingClient client = new NettyRemotingClient(config);
        if (hook != null) {
            client.registerRPCHook(hook);
        }
        client.start();
        try {
            RemotingCommand request = RemotingCommand.createRequestCommand(code, null);
            for (String field : ext) {
                int eq = field.indexOf('=');
                request.addExtField(field.substring(0, eq), field.substring(eq + 1));
            }
            if (body != null) {
                request.setBody(body.getBytes(StandardCharsets.UTF_8));
            }
            RemotingCommand response = client.invokeSync(addr, request, 15000);
            Json out = Json.of("event", "response").put("requestCode", code).put("code", response.getCode())
                .put("remark", response.getRemark()).put("ext", response.getExtFields());
            byte[] responseBody = response.getBody();
            return out.put("body", responseBody == null ? null : new String(responseBody, StandardCharsets.UTF_8));
        } catch (Exception e) {
            return Clients.error("request-failed", e).put("requestCode", code);
        } finally {
            client.shutdown();
        }
    }
}
