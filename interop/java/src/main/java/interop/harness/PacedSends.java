package interop.harness;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The part of a scenario producer program that does not depend on its client library, shared by
 * ScenarioProducer (rocketmq-client) and GrpcScenarioProducer (rocketmq-client-java), which differ only
 * in how one message is sent and reported. "go" on stdin starts the sends; "stop" or the end of stdin
 * (the scenario runner went away) ends them early. Each producer sends from its own thread at a fixed
 * rate, from a random phase, one send at a time; a producer more than a second behind starts over
 * rather than bursting.
 */
final class PacedSends {
    /** One send of producer {@code index}; {@code n} counts that producer's sends from 0. */
    interface Send {
        void send(int index, long n);
    }

    private static volatile boolean stopped;

    private PacedSends() {
    }

    /**
     * Waits for "go" on stdin and then watches it for "stop"; false when stdin said anything else first
     * or ended: nothing is to be sent.
     */
    static boolean awaitGo() throws IOException {
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        if (!"go".equals(stdin.readLine())) {
            return false;
        }
        Thread watcher = new Thread(() -> watch(stdin), "stdin");
        watcher.setDaemon(true);
        watcher.start();
        return true;
    }

    /** Runs {@code producers} senders at {@code rate} sends per second each, for {@code millis}, and waits for them. */
    static void run(int producers, double rate, long millis, Send send) throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000L;
        List<Thread> senders = new ArrayList<>();
        for (int i = 0; i < producers; i++) {
            final int index = i;
            Thread sender = new Thread(() -> pace(index, rate, end, send), "producer-" + i);
            senders.add(sender);
            sender.start();
        }
        for (Thread sender : senders) {
            sender.join();
        }
    }

    /** The exception and its causes, "Class: message <- Class: message", for the runner to classify. */
    static String chain(Throwable error) {
        StringBuilder out = new StringBuilder();
        for (Throwable t = error; t != null && out.length() < 2000; t = t.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return out.toString();
    }

    private static void watch(BufferedReader stdin) {
        try {
            String line;
            while ((line = stdin.readLine()) != null && !"stop".equals(line)) {
                // only "stop" means something now
            }
        } catch (Exception ignored) {
            // a broken stdin means the runner is gone: stop as well
        }
        stopped = true;
    }

    private static void pace(int index, double rate, long end, Send send) {
        long period = (long) (1_000_000_000L / rate);
        long next = System.nanoTime() + (long) (Math.random() * period);
        for (long n = 0; !stopped; n++) {
            long wait = next - System.nanoTime();
            if (wait > 0) {
                try {
                    Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                } catch (InterruptedException e) {
                    return;
                }
            } else if (-wait > 1_000_000_000L) {
                next = System.nanoTime();  // more than a second behind: start over, do not burst
            }
            if (next >= end || stopped) {
                return;
            }
            send.send(index, n);
            next += period;
        }
    }
}
