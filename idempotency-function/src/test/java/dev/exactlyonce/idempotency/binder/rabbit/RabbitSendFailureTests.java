package dev.exactlyonce.idempotency.binder.rabbit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.idempotency.outbox.PublishConfirmation.Verdict;
import org.junit.jupiter.api.Test;
import org.springframework.amqp.UncategorizedAmqpException;

/**
 * What a failure thrown by a send tells of the relay's row, told by where it was thrown, with the stack traces seen
 * (OutboxThroughBrokerOutagesOnRabbitIT meets the first one about once in five runs of its refused route; these fix
 * the classification of both). A race of Spring AMQP's channel cache with a channel the broker closed is the broker's
 * condition: it counts no attempt. What the client's frame writer refuses is the row's content: it does.
 */
class RabbitSendFailureTests {

    private final RabbitPublishConfirmation confirmation = new RabbitPublishConfirmation();

    @Test
    void aNullPointerExceptionOfTheTemplateOnAChannelTheBrokerClosedIsTheBrokersCondition() {
        NullPointerException race = thrownAt(
                new NullPointerException(),
                frame("java.util.concurrent.ConcurrentHashMap", "putVal"),
                frame("java.util.concurrent.ConcurrentHashMap", "putIfAbsent"),
                frame("org.springframework.amqp.rabbit.core.RabbitTemplate", "addListener"),
                frame("org.springframework.amqp.rabbit.core.RabbitTemplate", "invokeAction"));

        assertThat(this.confirmation.failed(new UncategorizedAmqpException(race)))
                .isEqualTo(Verdict.UNANSWERED);
    }

    @Test
    void aListenerNotRegisteredOfTheChannelCacheIsTheBrokersCondition() {
        IllegalArgumentException race = thrownAt(
                new IllegalArgumentException("Listener not registered: RabbitTemplate []"),
                frame("org.springframework.util.Assert", "notNull"),
                frame("org.springframework.amqp.rabbit.connection.PublisherCallbackChannelImpl", "addPendingConfirm"));

        assertThat(this.confirmation.failed(new UncategorizedAmqpException(race)))
                .isEqualTo(Verdict.UNANSWERED);
    }

    @Test
    void aRoutingKeyTheClientsFrameWriterRefusesIsTheRowsOwn() {
        IllegalArgumentException tooLong = thrownAt(
                new IllegalArgumentException("Short string too long; utf-8 encoded length = 256, max = 255."),
                frame("com.rabbitmq.client.impl.ValueWriter", "writeShortstr"),
                frame("org.springframework.amqp.rabbit.core.RabbitTemplate", "doSend"));

        // Unexplained counts an attempt: the row parks after max-attempts, as one the broker will never take.
        assertThat(this.confirmation.failed(new UncategorizedAmqpException(tooLong)))
                .isEqualTo(Verdict.UNEXPLAINED);
    }

    private static <T extends Throwable> T thrownAt(T failure, StackTraceElement... frames) {
        failure.setStackTrace(frames);
        return failure;
    }

    private static StackTraceElement frame(String type, String method) {
        return new StackTraceElement(type, method, null, -1);
    }
}
