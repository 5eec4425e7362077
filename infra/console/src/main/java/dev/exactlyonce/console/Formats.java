package dev.exactlyonce.console;

import java.time.Duration;
import org.jspecify.annotations.Nullable;
import org.springframework.stereotype.Component;

/** How the pages write durations: the two largest units, such as {@code 3d 4h} or {@code 5m 12s}. */
@Component("formats")
public class Formats {

    public String duration(@Nullable Duration duration) {
        if (duration == null) {
            return "—";
        }
        long seconds = Math.max(0, duration.toSeconds());
        long days = seconds / 86_400;
        long hours = seconds % 86_400 / 3_600;
        long minutes = seconds % 3_600 / 60;
        if (days > 0) {
            return days + "d " + hours + "h";
        }
        if (hours > 0) {
            return hours + "h " + minutes + "m";
        }
        return minutes > 0 ? minutes + "m " + seconds % 60 + "s" : seconds + "s";
    }
}
