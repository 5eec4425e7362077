package dev.exactlyonce.idempotency.guard;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.ThingHappened;
import dev.exactlyonce.idempotency.Things;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventHeaders;
import dev.exactlyonce.idempotency.test.EnableIdempotencyTestKit;
import dev.exactlyonce.idempotency.test.EventDeliveries;
import dev.exactlyonce.idempotency.test.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHeaders;
import org.springframework.messaging.support.MessageBuilder;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A business function that takes a {@code Message} gets the event's headers ({@code event_id}, {@code event_name},
 * {@code occurred_at}) and those the message was delivered with, first after the guard or further down the
 * composition; the guard copies the delivered headers only where a business function takes a {@code Message}.
 */
class EventHeadersTests {

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Service {

        final List<MessageHeaders> received = new CopyOnWriteArrayList<>();

        @Bean
        Consumer<Message<ThingHappened>> recordThingMessage() {
            return message -> this.received.add(message.getHeaders());
        }

        @Bean
        Function<ThingHappened, ThingHappened> checkThing() {
            return thing -> thing;
        }
    }

    @DynamicPropertySource
    static void database(DynamicPropertyRegistry registry) {
        TestPostgres.newDatabase("eventheaders").registerDataSource(registry);
    }

    abstract static class Deliveries {

        @Autowired
        EventDeliveries deliveries;

        @Autowired
        Service service;

        @BeforeEach
        void forgetWhatWasReceived() {
            this.service.received.clear();
        }

        @Test
        void theFunctionGetsTheEventsHeadersAndTheDeliveredOnes() {
            EventEnvelope<ThingHappened> event = Things.thingHappened();
            this.deliveries.deliverMessage(MessageBuilder.withPayload(new EnvelopeCodec().encode(event))
                    .setHeader("x-tenant", "blue")
                    .build());

            assertThat(this.deliveries.lastError()).isNull();
            assertThat(this.service.received).singleElement().satisfies(headers -> {
                assertThat(headers.get(EventHeaders.EVENT_ID)).isEqualTo(event.eventId());
                assertThat(headers.get(EventHeaders.EVENT_NAME)).isEqualTo(ThingHappened.NAME);
                assertThat(headers.get(EventHeaders.OCCURRED_AT)).isEqualTo(event.occurredAt());
                assertThat(headers.get("x-tenant")).isEqualTo("blue");
            });
        }

        /**
         * The event's headers are the guard's, read from the envelope, whatever the publisher set under their names:
         * an envelope without {@code occurred_at} beside a publisher's {@code occurred_at} text header made a function
         * that reads it as an {@code Instant} fail on every attempt (a retried poison), and a publisher's
         * {@code event_id} header named another event than the one claimed.
         */
        @Test
        void thePublishersHeadersNamedAsTheEventsDoNotReachTheFunction() {
            EventEnvelope<ThingHappened> event = Things.thingHappened();
            String withoutTime = new String(new EnvelopeCodec().encode(event), StandardCharsets.UTF_8)
                    .replaceFirst(",?\\s*\"occurred_at\"\\s*:\\s*\"[^\"]*\"", "");
            assertThat(withoutTime).doesNotContain("occurred_at");
            this.deliveries.deliverMessage(MessageBuilder.withPayload(withoutTime.getBytes(StandardCharsets.UTF_8))
                    .setHeader(EventHeaders.OCCURRED_AT, "2020-01-01T00:00:00Z")
                    .setHeader(EventHeaders.EVENT_ID, UUID.randomUUID().toString())
                    .build());

            assertThat(this.deliveries.lastError()).isNull();
            assertThat(this.service.received).singleElement().satisfies(headers -> {
                assertThat(headers.get(EventHeaders.EVENT_ID)).isEqualTo(event.eventId());
                assertThat(headers).doesNotContainKey(EventHeaders.OCCURRED_AT);
            });
        }
    }

    @Nested
    @SpringBootTest(
            classes = Service.class,
            properties = "spring.cloud.function.definition=idempotencyGuard|recordThingMessage")
    @EnableIdempotencyTestKit
    class FirstAfterTheGuard extends Deliveries {}

    @Nested
    @SpringBootTest(
            classes = Service.class,
            properties = "spring.cloud.function.definition=idempotencyGuard|checkThing|recordThingMessage")
    @EnableIdempotencyTestKit
    class FurtherDownTheComposition extends Deliveries {}
}
