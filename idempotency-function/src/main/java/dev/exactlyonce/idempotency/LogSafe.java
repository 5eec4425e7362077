package dev.exactlyonce.idempotency;

/**
 * Text from a message, made safe to put in a log line, an exception message or an operator's terminal: control
 * characters (a CR or LF that would forge a log line, an escape sequence for a terminal) escaped as {@code \\uXXXX},
 * and cut after {@value #LENGTH} characters. What the library and its tools print of a message goes through it.
 */
public final class LogSafe {

    /** How many characters of the text are kept. */
    public static final int LENGTH = 200;

    private LogSafe() {}

    /** The text, escaped and cut. */
    public static String of(String text) {
        StringBuilder printable = escape(text, LENGTH);
        if (text.codePointCount(0, text.length()) > LENGTH) {
            printable.append("...");
        }
        return printable.toString();
    }

    /**
     * The text escaped, whole: for a text the library wrote around parts of a message, each already cut, that may
     * still quote the message (a parser's error message does), such as a rejection's.
     */
    static String escaped(String text) {
        return escape(text, Integer.MAX_VALUE).toString();
    }

    private static StringBuilder escape(String text, int length) {
        StringBuilder printable = new StringBuilder(Math.min(text.length(), length) + 8);
        text.codePoints().limit(length).forEach(c -> {
            if (Character.isISOControl(c) || Character.getType(c) == Character.FORMAT) {
                printable.append("\\u%04x".formatted(c));
            } else {
                printable.appendCodePoint(c);
            }
        });
        return printable;
    }
}
