package interop.harness;

import java.util.Map;
import java.util.TreeMap;

/**
 * A minimal JSON object writer: the harness prints one JSON object per line for the Python side,
 * and must not depend on a JSON library, because 4.9.7 and 5.3.3 bring different ones.
 */
public final class Json {
    private final Map<String, Object> fields = new TreeMap<>();

    public static Json of(String key, Object value) {
        return new Json().put(key, value);
    }

    public Json put(String key, Object value) {
        fields.put(key, value);
        return this;
    }

    /** Prints the object as one line; synchronized so that lines of several threads never interleave. */
    public void println() {
        String line = toString();
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    @Override
    public String toString() {
        StringBuilder out = new StringBuilder();
        write(out, fields);
        return out.toString();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Json) {
            write(out, ((Json) value).fields);
        } else if (value instanceof Map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : new TreeMap<>((Map<?, ?>) value).entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                string(out, String.valueOf(entry.getKey()));
                out.append(':');
                write(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof Iterable) {
            out.append('[');
            boolean first = true;
            for (Object item : (Iterable<?>) value) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                write(out, item);
            }
            out.append(']');
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else {
            string(out, value.toString());
        }
    }

    private static void string(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
