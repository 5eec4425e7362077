package dev.exactlyonce.idempotency.envelope;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What an event name may hold: it goes into log lines, the MDC and meters' tags. */
class EventNameCheckTests {

    @ParameterizedTest
    @ValueSource(strings = {"a", "7", "order.order.placed.v1", "Stock-Reserved_v2", "a..b", "a-"})
    void lettersAndDigitsThenDotsDashesAndUnderscoresAreANameUpTo255(String name) {
        assertThat(EventEnvelope.isEventName(name)).isTrue();
        assertThat(EventEnvelope.isEventName(name + "x".repeat(255 - name.length())))
                .isTrue();
    }

    @ParameterizedTest
    @ValueSource(strings = {"", ".a", "-a", "_a", "a b", "a\nb", "a/b", "é", "a\u0000", "order.placed${jndi}"})
    void anythingElseIsNot(String name) {
        assertThat(EventEnvelope.isEventName(name)).isFalse();
    }

    @ParameterizedTest
    @ValueSource(strings = {"a", "order.order.placed.v1"})
    void norAreMoreThan255Characters(String name) {
        assertThat(EventEnvelope.isEventName(name + "x".repeat(256 - name.length())))
                .isFalse();
    }
}
