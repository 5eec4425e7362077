package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.LogSafe;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.dao.DataAccessException;
import org.springframework.integration.IntegrationMessageHeaderAccessor;
import org.springframework.messaging.Message;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.MessagingException;
import org.springframework.messaging.support.ChannelInterceptor;
import org.springframework.messaging.support.ErrorMessage;

/**
 * Records each message about to be dead-lettered on a binding whose dead letters come back with no route the broker
 * vouches for ({@link EventRoutes#movesDeadLettersBack}), so that the guard takes it back when replayed. See
 * docs/operations.md, "Replaying dead letters".
 */
final class RecordedDeadLetters implements ChannelInterceptor {

    private static final Logger logger = LoggerFactory.getLogger(RecordedDeadLetters.class);

    private final GuardedBinding binding;

    private final IdempotencyGuard guard;

    private final EventRoutes routes;

    private final ConsumptionHalt halt;

    private final @Nullable BinderGiveBack giveBack;

    private final String table;

    RecordedDeadLetters(
            GuardedBinding binding,
            IdempotencyGuard guard,
            EventRoutes routes,
            ConsumptionHalt halt,
            @Nullable BinderGiveBack giveBack,
            String table) {
        this.binding = binding;
        this.guard = guard;
        this.routes = routes;
        this.halt = halt;
        this.giveBack = giveBack;
        this.table = table;
    }

    @Override
    public Message<?> preSend(Message<?> message, MessageChannel channel) {
        if (!(message instanceof ErrorMessage error) || OutageGiveBack.isSettled(message) || !deadLettersOne(error)) {
            return message;
        }
        Message<?> failed = error.getOriginalMessage();
        if (failed == null && error.getPayload() instanceof MessagingException messaging) {
            failed = messaging.getFailedMessage();
        }
        if (failed == null) {
            return message;
        }
        try {
            this.guard.recordDeadLetter(this.binding, failed, this.routes, this.halt.socketTimeout());
        } catch (DataAccessException ex) {
            if (!this.halt.isOutage(ex)) {
                logger.error(
                        "Could not record a dead letter of {} in {} ({}): it is dead-lettered unrecorded, and a replay"
                                + " of it will be refused (UNRECORDED_DEAD_LETTER). Check the service's privileges on"
                                + " that table",
                        this.binding.bindingName(),
                        this.table,
                        LogSafe.of(String.valueOf(ex.getMessage())));
                return message;
            }
            // The database went away: the delivery comes back once it answers, and is recorded then.
            this.halt.onOutage(ex);
            String reason = "Could not record a dead letter of %s in %s (%s): it is given back, to be delivered again"
                    .formatted(this.binding.bindingName(), this.table, ex.getMessage());
            throw this.giveBack != null ? this.giveBack.givenBack(reason, ex) : new MessagingException(reason, ex);
        }
        return message;
    }

    /** Whether the binder dead-letters one message: a batch split by {@link FailedBatchSplitter} has none left. */
    private static boolean deadLettersOne(ErrorMessage error) {
        Object source = error.getHeaders().get(IntegrationMessageHeaderAccessor.SOURCE_DATA);
        return !(source instanceof List<?> received) || received.size() == 1;
    }
}
