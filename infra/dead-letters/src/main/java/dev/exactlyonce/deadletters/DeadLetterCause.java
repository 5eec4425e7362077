package dev.exactlyonce.deadletters;

import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * Why a message was dead-lettered, as one line dead letters are grouped by: the library's rejection reason
 * ({@code ROUTE_MISMATCH}, {@code NOT_JSON}, ... at the head of {@code x-exception-message}), or else the exception's
 * type and the first frame of application code in {@code x-exception-stacktrace}, or the reason the broker recorded in
 * {@code x-death} ({@code broker: expired}).
 */
public final class DeadLetterCause {

    private static final Pattern REASON = Pattern.compile("^([A-Z][A-Z_]{2,}): ");

    private static final Pattern THROWN =
            Pattern.compile("^\\s*(?:Caused by: |Suppressed: )?([a-zA-Z_$][\\w$]*(?:\\.[a-zA-Z_$][\\w$]*)+): ?(.*)$");

    private static final Pattern FRAME = Pattern.compile("^\\s*at ([\\w$.]+)\\.([\\w$<>]+)\\(");

    /** Frames of the platform, the frameworks and the library, which a cause skips for the application's first. */
    private static final List<String> NOT_APPLICATION = List.of(
            "java.",
            "javax.",
            "jdk.",
            "sun.",
            "org.springframework.",
            "com.rabbitmq.",
            "reactor.",
            "io.micrometer.",
            "dev.exactlyonce.idempotency.",
            "com.zaxxer.",
            "org.postgresql.",
            "org.mariadb.");

    private DeadLetterCause() {}

    /**
     * The cause of a dead letter.
     *
     * @param headers its headers, as the RabbitMQ client or the management API gives them
     */
    public static String of(Map<String, ?> headers) {
        String message = text(headers.get("x-exception-message"));
        Matcher reason = REASON.matcher(message);
        if (reason.find()) {
            return reason.group(1);
        }
        String trace = text(headers.get("x-exception-stacktrace"));
        if (trace.isBlank()) {
            if (!message.isBlank()) {
                return "unknown: " + message.lines().findFirst().orElse("");
            }
            String death = DeadLetterReplay.newestDeath(headers);
            return death != null ? "broker: " + death : "no cause recorded";
        }
        // The real cause is the exception of the trace whose message is the dead letter's (the library puts the real
        // cause's there); else the trace's last cause. A trace of the binder's holds several, and circular references.
        List<String> lines = trace.lines().toList();
        int at = -1;
        String type = "unknown";
        for (int i = 0; i < lines.size(); i++) {
            Matcher thrown = THROWN.matcher(lines.get(i));
            if (!thrown.find()) {
                continue;
            }
            boolean cause = lines.get(i).strip().startsWith("Caused by: ");
            if (thrown.group(2).strip().equals(message.strip())) {
                at = i;
                type = thrown.group(1);
                break;
            }
            if (at < 0 || cause) {
                at = i;
                type = thrown.group(1);
            }
        }
        for (String line : lines.subList(Math.max(at, 0), lines.size())) {
            Matcher frame = FRAME.matcher(line);
            if (frame.find() && NOT_APPLICATION.stream().noneMatch(frame.group(1)::startsWith)) {
                return type + " at " + frame.group(1) + "." + frame.group(2);
            }
        }
        return type;
    }

    /**
     * When the broker dead-lettered the message itself (expired, over a length limit, past a delivery limit), by its
     * newest {@code x-death}; {@code null} when it did not (a dead letter the binder republished carries no time).
     */
    public static @Nullable Instant brokersDeathTime(Map<String, ?> headers) {
        return DeadLetterReplay.newestDeathTime(headers);
    }

    private static String text(@Nullable Object value) {
        return value != null ? value.toString() : "";
    }
}
