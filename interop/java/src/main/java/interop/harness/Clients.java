package interop.harness;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * What every harness client shares: the optional ACL signing hook (AclClientRPCHook with the
 * keys given as --access-key/--secret-key) and the error codes Java attaches to its exceptions.
 * TLS is not an option here: Java's clients read it from -Dtls.enable=true (TlsSystemConfig).
 */
final class Clients {
    private Clients() {
    }

    /**
     * What every harness client sets: the NameServer, no VIP channel (port-2, which a broker stub
     * does not open), an instance name of its own, and a route-query timeout for a busy machine
     * (--api-timeout-ms, 15 s by default; Java's 3 s made a 5.3.3 client's first query time out
     * while the JVM was still loading classes on a loaded 2-core machine).
     */
    static void configure(ClientConfig client, Args args, String role) {
        client.setNamesrvAddr(args.get("namesrv"));
        client.setVipChannelEnabled(false);
        client.setInstanceName("interop-" + role + "-" + ProcessHandle.current().pid());
        client.setMqClientApiTimeout(Integer.parseInt(args.get("api-timeout-ms", "15000")));
    }

    /** The signing hook, or null when no keys were given (an unsigned client). */
    static RPCHook aclHook(Args args) {
        String accessKey = args.get("access-key", "");
        if (accessKey.isEmpty()) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(accessKey, args.get("secret-key")));
    }

    /** The response code inside a client exception (MQClientException, MQBrokerException), or -1. */
    static int responseCode(Throwable error) {
        for (Throwable t = error; t != null; t = t.getCause()) {
            try {
                Object code = t.getClass().getMethod("getResponseCode").invoke(t);
                if (code instanceof Integer && (Integer) code != -1) {
                    return (Integer) code;
                }
            } catch (ReflectiveOperationException ignored) {
                // not a client exception: look at its cause
            }
        }
        return -1;
    }

    static Json error(String event, Throwable error) {
        return Json.of("event", event).put("code", responseCode(error)).put("error", String.valueOf(error));
    }
}
