package interop.harness;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Command-line options of the form {@code --name value}, repeatable. Kept tiny on purpose: the
 * harness programs are driven by the Python tests, not by people, so errors just name the option.
 */
public final class Args {
    private final Map<String, List<String>> values = new HashMap<>();

    public Args(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --name value at: " + argv[i]);
            }
            values.computeIfAbsent(argv[i].substring(2), k -> new ArrayList<>()).add(argv[++i]);
        }
    }

    public String get(String name) {
        List<String> all = values.get(name);
        if (all == null) {
            throw new IllegalArgumentException("missing --" + name);
        }
        return all.get(all.size() - 1);
    }

    public String get(String name, String fallback) {
        return values.containsKey(name) ? get(name) : fallback;
    }

    public List<String> all(String name) {
        return values.getOrDefault(name, List.of());
    }
}
