package interop.harness;

/**
 * A Java client over TLS as Java users turn it on: -Dtls.enable=true (TlsSystemConfig; with
 * tls.test.mode.enable, Java's default, it trusts any server certificate). Fetches a route and
 * sends, printing each result code. Keys are optional, for TLS and ACL together.
 *
 * <pre>
 * java -Dtls.enable=true ... TlsClient --namesrv H:P --topic T [--count 1] [--access-key AK --secret-key SK]
 * </pre>
 */
public final class TlsClient {
    public static void main(String[] argv) throws Exception {
        if (!Boolean.parseBoolean(System.getProperty("tls.enable", "false"))) {
            System.err.println("TlsClient needs -Dtls.enable=true");
            System.exit(2);
        }
        ClientChecks.run(new Args(argv));
        System.exit(0);
    }
}
