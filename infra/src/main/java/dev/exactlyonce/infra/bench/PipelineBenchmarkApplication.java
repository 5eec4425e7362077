package dev.exactlyonce.infra.bench;

import dev.exactlyonce.idempotency.EnvelopeCodec;
import dev.exactlyonce.idempotency.envelope.EventEnvelope;
import dev.exactlyonce.idempotency.envelope.EventName;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.ProcessedEventStore;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.math.BigDecimal;
import java.util.List;
import java.util.UUID;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.integration.channel.NullChannel;
import org.springframework.integration.handler.advice.IdempotentReceiverInterceptor;
import org.springframework.integration.jdbc.metadata.JdbcMetadataStore;
import org.springframework.integration.selector.MetadataStoreSelector;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageHandler;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The service the pipeline benchmark runs, scenario by scenario (the function definition picks the scenario). Every
 * scenario does the same business effect, one row inserted in one transaction per event: with the guard, without it,
 * in batches, or behind Spring Integration's idempotent receiver.
 */
@SpringBootConfiguration
@EnableAutoConfiguration
class PipelineBenchmarkApplication {

    static final String EVENT = "bench.effect.v1";

    /** What {@code recordEffectAndEmit} emits. */
    static final String EMITTED = "bench.effect.recorded.v1";

    /** The business effect's insert: every scenario's, and the SQL-only references'. */
    static final String INSERT = "INSERT INTO effect (id, amount) VALUES (?, ?)";

    /**
     * The benchmark's event.
     *
     * @param id the effect's row
     * @param amount what it records
     */
    @EventName(EVENT)
    record Effect(UUID id, BigDecimal amount) {}

    /** Behind the guard: {@code idempotencyGuard|recordEffect}. */
    @Bean
    Consumer<Effect> recordEffect(JdbcTemplate jdbc) {
        return effect -> jdbc.update(INSERT, effect.id(), effect.amount());
    }

    /** Behind the guard, emitting one event through the outbox: {@code idempotencyGuard|recordEffectAndEmit}. */
    @Bean
    Consumer<Effect> recordEffectAndEmit(JdbcTemplate jdbc, Outbox outbox) {
        return effect -> {
            jdbc.update(INSERT, effect.id(), effect.amount());
            outbox.emit(EMITTED, effect.id().toString(), effect);
        };
    }

    /** Behind the guard, in batches: {@code idempotencyGuard|recordEffects}. */
    @Bean
    Consumer<List<Effect>> recordEffects(JdbcTemplate jdbc) {
        return effects -> jdbc.batchUpdate(INSERT, effects, effects.size(), (statement, effect) -> {
            statement.setObject(1, effect.id());
            statement.setBigDecimal(2, effect.amount());
        });
    }

    /** The ceiling: batches taken off the queue and dropped, no database, no guard. */
    @Bean
    Consumer<List<byte[]>> discardAll() {
        return batch -> {};
    }

    /** The ceiling of single messages: each taken off the queue and dropped, no database, no guard. */
    @Bean
    Consumer<byte[]> discardOne() {
        return body -> {};
    }

    /** The same effect without the guard: it reads the envelope and opens the transaction itself. */
    @Bean
    Consumer<Message<byte[]>> recordEffectWithoutGuard(JdbcTemplate jdbc, TransactionTemplate transactions) {
        EnvelopeCodec codec = new EnvelopeCodec();
        return message -> transactions.executeWithoutResult(status -> insert(jdbc, codec, message.getPayload()));
    }

    /**
     * The guard's SQL without the guard: the handler reads the envelope as the guard does, then, in its own transaction,
     * runs the claim the guard runs (the library's {@link ProcessedEventStore}, on the library's table) and, when the
     * event is new, maps the payload and inserts the effect. The guard's cost beyond this handler's is the library's
     * Java, the same statements in the same pipeline on both sides.
     */
    @Bean
    Consumer<Message<byte[]>> recordEffectWithClaim(
            DataSource dataSource, JdbcTemplate jdbc, TransactionTemplate transactions) {
        EnvelopeCodec codec = new EnvelopeCodec();
        ProcessedEventStore claims = Dialect.of(dataSource).processedEvents(jdbc, "processed_event");
        return message -> transactions.executeWithoutResult(status -> {
            EventEnvelope<EnvelopeCodec.RawPayload> envelope = codec.read(message.getPayload());
            if (claims.claim(new ProcessedEventStore.Key(envelope.eventId(), envelope.eventName()), "")) {
                Effect effect =
                        codec.readPayload(envelope.payload(), Effect.class, envelope.eventName(), envelope.eventId());
                jdbc.update(INSERT, effect.id(), effect.amount());
            }
        });
    }

    /**
     * The same effect behind Spring Integration's idempotent receiver: an {@link IdempotentReceiverInterceptor} with a
     * {@link MetadataStoreSelector} on a {@link JdbcMetadataStore} in PostgreSQL, keyed by the AMQP message id (the
     * event id), in the same transaction as the effect; duplicates go to a null channel.
     */
    @Bean
    Consumer<Message<byte[]>> recordEffectWithPeer(
            DataSource dataSource, JdbcTemplate jdbc, TransactionTemplate transactions) {
        EnvelopeCodec codec = new EnvelopeCodec();
        JdbcMetadataStore store = new JdbcMetadataStore(dataSource);
        store.afterPropertiesSet();
        IdempotentReceiverInterceptor idempotentReceiver = new IdempotentReceiverInterceptor(new MetadataStoreSelector(
                message -> String.valueOf(message.getHeaders().get("amqp_messageId")), store));
        idempotentReceiver.setDiscardChannel(new NullChannel());
        MessageHandler effect = message -> insert(jdbc, codec, (byte[]) message.getPayload());
        ProxyFactory proxy = new ProxyFactory(effect);
        proxy.addAdvice(idempotentReceiver);
        MessageHandler guarded = (MessageHandler) proxy.getProxy();
        return message -> transactions.executeWithoutResult(status -> guarded.handleMessage(message));
    }

    /** Reads the envelope as the guard does (its payload mapped straight from its bytes), then inserts the effect. */
    private static void insert(JdbcTemplate jdbc, EnvelopeCodec codec, byte[] body) {
        EventEnvelope<EnvelopeCodec.RawPayload> envelope = codec.read(body);
        Effect effect = codec.readPayload(envelope.payload(), Effect.class, envelope.eventName(), envelope.eventId());
        jdbc.update(INSERT, effect.id(), effect.amount());
    }
}
