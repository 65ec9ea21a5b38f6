package interop.harness;

import java.time.Instant;

/**
 * Wall-clock milliseconds (with fractions) read through the monotonic clock: the scenario runner
 * places every record on its own timeline by the wall clock, which all processes of the machine share,
 * and a step of the wall clock during a run must not reorder one program's records.
 */
final class WallClock {
    private static final long BASE_NANOS = System.nanoTime();
    private static final double BASE_MILLIS = epochMillis(Instant.now());

    private WallClock() {
    }

    static double millis() {
        return BASE_MILLIS + (System.nanoTime() - BASE_NANOS) / 1e6;
    }

    private static double epochMillis(Instant now) {
        return now.getEpochSecond() * 1000.0 + now.getNano() / 1e6;
    }
}
