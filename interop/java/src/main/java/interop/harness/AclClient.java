package interop.harness;

/**
 * A Java client that signs every request with AclClientRPCHook (Java's HMAC-SHA1 over the sorted
 * ext fields and the body): fetches a route and sends, printing each result code.
 *
 * <pre>
 * AclClient --namesrv H:P --topic T --access-key AK --secret-key SK [--count 1] [--group G] [--broker H:P]
 * </pre>
 * An empty --access-key makes it an unsigned client (no hook), for the "missing keys" case.
 */
public final class AclClient {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        args.get("access-key");
        ClientChecks.run(args);
        System.exit(0);
    }
}
