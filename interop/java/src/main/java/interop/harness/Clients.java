package interop.harness;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
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
