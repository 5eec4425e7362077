package dev.exactlyonce.idempotency;

/**
 * Text from a message, made safe to put in a log line, an exception message or an operator's terminal: control
 * characters (a CR or LF that would forge a log line, an escape sequence for a terminal) escaped as {@code \\uXXXX},
 * and cut after {@value #LENGTH} characters. What the library and its tools print of a message goes through it.
 */
public final class Printable {

    /** How many characters of the text are kept. */
    public static final int LENGTH = 200;

    private Printable() {}

    /** The text, escaped and cut. */
    public static String of(String text) {
        StringBuilder printable = new StringBuilder(Math.min(text.length(), LENGTH) + 8);
        int[] characters = text.codePoints().limit(LENGTH).toArray();
        for (int c : characters) {
            if (Character.isISOControl(c) || Character.getType(c) == Character.FORMAT) {
                printable.append("\\u%04x".formatted(c));
            } else {
                printable.appendCodePoint(c);
            }
        }
        if (text.codePointCount(0, text.length()) > LENGTH) {
            printable.append("...");
        }
        return printable.toString();
    }
}
