package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import java.lang.reflect.Proxy;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.binder.rabbit.properties.RabbitConsumerProperties;
import org.springframework.messaging.MessageHeaders;

/**
 * A binding gets the parts of the binder whose consumer properties it has, as with the consumer defaults: a binder the
 * service wraps, or a proxy of it, keeps its route check and its give-back.
 */
class BinderAdaptersTests {

    private static final EventRoutes RABBIT_ROUTES = new EventRoutes() {

        @Override
        public boolean binds(Object binder, @Nullable Object consumerProperties) {
            return consumerProperties instanceof RabbitConsumerProperties;
        }

        @Override
        public @Nullable String route(MessageHeaders headers) {
            return "routing key";
        }
    };

    private static final BinderGiveBack RABBIT_GIVE_BACK = new BinderGiveBack() {

        @Override
        public boolean binds(Object binder, @Nullable Object consumerProperties) {
            return consumerProperties instanceof RabbitConsumerProperties;
        }

        @Override
        public RuntimeException givenBack(String reason, Throwable failure) {
            return new IllegalStateException(reason, failure);
        }
    };

    private final BinderAdapters adapters =
            new BinderAdapters(List.of(), List.of(RABBIT_GIVE_BACK), List.of(RABBIT_ROUTES));

    @Test
    void aWrappedBinderKeepsItsRoutesAndItsGiveBack() {
        Object wrapped = binderWhoseConsumersAre(new RabbitConsumerProperties());

        assertThat(this.adapters.routesOf(wrapped, "in")).isSameAs(RABBIT_ROUTES);
        assertThat(this.adapters.giveBackOf(wrapped, "in")).isSameAs(RABBIT_GIVE_BACK);
    }

    @Test
    void aBinderOfOtherPropertiesHasNone() {
        Object other = binderWhoseConsumersAre(new Object());

        assertThat(this.adapters.routesOf(other, "in")).isNull();
        assertThat(this.adapters.giveBackOf(other, "in")).isNull();
        assertThat(this.adapters.routesOf(new Object(), "in"))
                .as("not a binder of extended properties")
                .isNull();
    }

    /** A binder as a service's wrapper or a JDK proxy shows it: not the binder's class, but its properties. */
    private static Object binderWhoseConsumersAre(Object consumerProperties) {
        return Proxy.newProxyInstance(
                BinderAdaptersTests.class.getClassLoader(),
                new Class<?>[] {Binder.class, ExtendedPropertiesBinder.class},
                (proxy, method, arguments) -> switch (method.getName()) {
                    case "getExtendedConsumerProperties" -> consumerProperties;
                    case "hashCode" -> System.identityHashCode(proxy);
                    case "equals" -> proxy == arguments[0];
                    case "toString" -> "a wrapped binder";
                    default -> null;
                });
    }
}
