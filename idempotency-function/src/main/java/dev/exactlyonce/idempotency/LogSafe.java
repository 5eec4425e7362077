package dev.exactlyonce.idempotency;

/**
 * Text from a message, made safe for a log line, an exception message or a terminal: control characters (a CR or LF
 * that would forge a log line, an escape sequence) escaped as {@code \\uXXXX}, cut after {@value #LENGTH} characters.
 * Whatever the library and its tools print of a message goes through it.
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

    /** The whole text escaped: a rejection's, its parts cut already, which may still quote a message's text. */
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
