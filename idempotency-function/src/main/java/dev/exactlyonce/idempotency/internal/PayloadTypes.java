package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.RejectedMessageException;
import dev.exactlyonce.idempotency.RejectedMessageException.Reason;
import dev.exactlyonce.idempotency.envelope.EventName;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.springframework.core.ResolvableType;

/**
 * The payload type a business function takes, per event name, read from {@link EventName} on its input type: the
 * type itself, or each permitted type of a sealed input type. An input type that names no event takes every event.
 */
public final class PayloadTypes {

    private final Type inputType;

    private final Map<String, Type> byEventName;

    private PayloadTypes(Type inputType, Map<String, Type> byEventName) {
        this.inputType = inputType;
        this.byEventName = byEventName;
    }

    public static PayloadTypes of(Type inputType) {
        Class<?> rawType = ResolvableType.forType(inputType).resolve(Object.class);
        Map<String, Type> byEventName = new LinkedHashMap<>();
        List<Class<?>> unnamed = new ArrayList<>();
        collect(rawType, byEventName, unnamed);
        if (!byEventName.isEmpty() && !unnamed.isEmpty()) {
            throw new StartupRefusal(
                    "%s permits %s, which has no @EventName"
                            .formatted(rawType.getName(), unnamed.get(0).getName()),
                    "Annotate every permitted type of %s with the name of the event it maps"
                            .formatted(rawType.getSimpleName()));
        }
        return new PayloadTypes(inputType, byEventName);
    }

    /** The event names the function handles; empty when it takes every event. */
    public Set<String> eventNames() {
        return this.byEventName.keySet();
    }

    /** The type to map the event's payload to. */
    public Type typeFor(IncomingEvent event) {
        if (this.byEventName.isEmpty()) {
            return this.inputType;
        }
        Type type = this.byEventName.get(event.eventName());
        if (type == null) {
            throw new RejectedMessageException(
                    Reason.UNKNOWN_EVENT,
                    event.eventId(),
                    "no function of this binding handles event '%s' (it handles %s)"
                            .formatted(event.eventName(), this.byEventName.keySet()));
        }
        return type;
    }

    private static void collect(Class<?> type, Map<String, Type> byEventName, List<Class<?>> unnamed) {
        EventName eventName = type.getAnnotation(EventName.class);
        if (eventName != null) {
            Type previous = byEventName.putIfAbsent(eventName.value(), type);
            if (previous != null && previous != type) {
                throw new StartupRefusal(
                        "%s and %s both map event '%s'"
                                .formatted(previous.getTypeName(), type.getTypeName(), eventName.value()),
                        "Give each event one type");
            }
        } else if (type.isSealed()) {
            for (Class<?> permitted : type.getPermittedSubclasses()) {
                collect(permitted, byEventName, unnamed);
            }
        } else {
            unnamed.add(type);
        }
    }
}
