package interop.harness;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.Permission;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs many Java mqadmin commands in one JVM: a JVM start costs seconds on a busy machine, and the
 * suite runs dozens of commands per version.
 *
 * <p>Reads one command per line on stdin, its arguments separated by TABs (exactly what follows
 * {@code mqadmin} on a command line), calls Apache's own entry point (MQAdminStartup.main0) and
 * prints one JSON line per command: its args, what it printed on stdout and stderr, and the status
 * it tried to exit with. Commands run one at a time, so replacing System.out/err per command
 * captures exactly that command's output. System.exit (ServerUtil exits on a bad option) is trapped
 * by a SecurityManager, which JDK 17 still allows with -Djava.security.manager=allow.
 *
 * <p>A line may start with {@code @timeout=MS} (a TAB after it) for a command that never ends by
 * itself (clusterRT repeats until stopped): its thread is stopped after MS and the result says
 * {@code "timeout": true} with the output it printed until then.
 *
 * <pre>
 * java -Djava.security.manager=allow ... AdminRunner [--timeout-ms 60000]
 * </pre>
 */
public final class AdminRunner {
    /** Thrown instead of exiting; carries the status the command asked for. */
    static final class ExitTrapped extends SecurityException {
        final int status;

        ExitTrapped(int status) {
            super("System.exit(" + status + ") trapped");
            this.status = status;
        }
    }

    private static final AtomicReference<Integer> EXIT_STATUS = new AtomicReference<>();

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        long timeoutMs = Long.parseLong(args.get("timeout-ms", "60000"));
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        trapExit();
        realOut.println(Json.of("event", "ready"));
        realOut.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            List<String> command = Arrays.asList(line.split("\t", -1));
            long limit = timeoutMs;
            if (command.get(0).startsWith("@timeout=")) {
                limit = Long.parseLong(command.get(0).substring("@timeout=".length()));
                command = command.subList(1, command.size());
            }
            Json result = run(command, limit);
            System.setOut(realOut);
            System.setErr(realErr);
            realOut.println(result);
            realOut.flush();
        }
        Runtime.getRuntime().halt(0);
    }

    private static Json run(List<String> command, long timeoutMs) throws InterruptedException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        EXIT_STATUS.set(null);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        long start = System.nanoTime();
        Thread worker = new Thread(() -> {
            try {
                MQAdminStartup.main0(command.toArray(new String[0]), null);
            } catch (ExitTrapped e) {
                // the status is in EXIT_STATUS
            } catch (Throwable t) {
                thrown.set(t);
            }
        }, "mqadmin-" + command.get(0));
        worker.setDaemon(true);
        worker.start();
        worker.join(timeoutMs);
        boolean timedOut = worker.isAlive();
        if (timedOut) {
            stop(worker);
        }
        System.out.flush();
        System.err.flush();
        return Json.of("event", "result").put("args", command)
            .put("stdout", out.toString(StandardCharsets.UTF_8)).put("stderr", err.toString(StandardCharsets.UTF_8))
            .put("exit", EXIT_STATUS.get()).put("timeout", timedOut)
            .put("thrown", thrown.get() == null ? null : String.valueOf(thrown.get()))
            .put("millis", (System.nanoTime() - start) / 1_000_000);
    }

    /** Thread.stop still works on JDK 17; later JDKs refuse, and the thread is left to itself. */
    @SuppressWarnings({"deprecation", "removal"})
    private static void stop(Thread worker) throws InterruptedException {
        try {
            worker.stop();
            worker.join(5000);
        } catch (UnsupportedOperationException ignored) {
            // JDK 20+: nothing more can be done in-process
        }
    }

    @SuppressWarnings("removal")
    private static void trapExit() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkPermission(Permission permission) {
            }

            @Override
            public void checkPermission(Permission permission, Object context) {
            }

            @Override
            public void checkExit(int status) {
                if (Thread.currentThread().getName().startsWith("mqadmin-")) {
                    EXIT_STATUS.compareAndSet(null, status);
                    throw new ExitTrapped(status);
                }
            }
        });
    }
}
