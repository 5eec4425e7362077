package dev.exactlyonce.idempotency.envelope;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * The name of the event whose payload the annotated type maps, for example
 * {@code @EventName("order.order.placed.v1") record OrderPlacedV1(...)}.
 *
 * <p>The guard hands a business function only the events its input type names: an envelope with another
 * {@code event_name} is rejected. A function that handles several events takes a sealed interface whose permitted
 * types are each annotated; the guard picks the type by the envelope's {@code event_name}. A function whose input
 * type names no event accepts every event name its route lets through: on RabbitMQ, with the route check on, its
 * binding must then say which routing keys its queue takes ({@code binding-routing-key}), or start-up is refused.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface EventName {

    /** The event name, as it appears in the envelope's {@code event_name} and the routing key. */
    String value();
}
