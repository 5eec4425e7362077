package dev.exactlyonce.idempotency;

/**
 * Text from a message, made safe to put in a log line or an exception message: control characters (a CR or LF that
 * would forge a log line, an escape sequence for a terminal) escaped as {@code \\uXXXX}, and cut after
 * {@value #LENGTH} characters.
 */
final class Printable {

    static final int LENGTH = 200;

    private Printable() {}

    static String of(String text) {
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
