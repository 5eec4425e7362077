package dev.exactlyonce.idempotency.envelope;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The name of the event whose payload the annotated type maps, as in {@code @EventName("order.order.placed.v1")}. The
 * guard hands a function only the events its input type names, rejecting others; a sealed interface of annotated types
 * takes several. A type that names none takes every event its route lets through (on RabbitMQ, set
 * {@code binding-routing-key}, or start-up is refused).
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface EventName {

    /** The event name, as it appears in the envelope's {@code event_name} and the routing key. */
    String value();
}
