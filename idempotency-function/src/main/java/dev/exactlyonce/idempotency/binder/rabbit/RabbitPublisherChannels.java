package dev.exactlyonce.idempotency.binder.rabbit;

import com.rabbitmq.client.AlreadyClosedException;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ShutdownSignalException;
import java.io.IOException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeoutException;
import org.springframework.amqp.rabbit.connection.CachingConnectionFactory;
import org.springframework.amqp.rabbit.connection.ConnectionFactory;
import org.springframework.amqp.rabbit.connection.PublisherCallbackChannelFactory;
import org.springframework.amqp.rabbit.connection.PublisherCallbackChannelImpl;

/**
 * Publisher channels whose nacks say why the broker closed the channel, every time.
 *
 * <p>When the broker closes a channel for what was published on it (a missing exchange, a routing key the user may
 * not publish, a message over the size limit), Spring AMQP nacks the channel's pending confirms twice over, and the
 * first nack to run is the one the publisher sees: once from the channel's shutdown, with the broker's reply, and once
 * from the publishing side closing the channel it found closed, with the text {@code Channel closed by application}.
 * Which comes first depends on the threads' timing, and on a loaded machine it is often the second: the relay could
 * not tell the broker's refusal of a row from a connection lost, took the row for unanswered, and neither counted its
 * attempts nor held only its key back. These channels nack with the close's own reason in both cases.
 *
 * <p>Set on the publishing connection factory of the binder the outbox publishes through (the binder publishes on the
 * connection factory's publisher factory), so the service's other publishers on it get these channels too; channels
 * opened before (cached by a publication that came first) keep Spring AMQP's until they close. A service that set a
 * {@code publisherChannelFactory} of its own on that factory has it replaced; a connection factory that does not
 * cache channels is left as it is, and its nacks may lack the broker's reason.
 */
final class RabbitPublisherChannels {

    private static final PublisherCallbackChannelFactory FACTORY = ClosingWithReason::new;

    private RabbitPublisherChannels() {}

    /**
     * Sets these channels on the factory the binder publishes with: the factory's publisher factory, or the factory
     * itself when it has none. Its consumers' channels are left as they were.
     */
    public static void install(ConnectionFactory factory) {
        ConnectionFactory publishing =
                factory.getPublisherConnectionFactory() != null ? factory.getPublisherConnectionFactory() : factory;
        if (publishing instanceof CachingConnectionFactory caching) {
            caching.setPublisherChannelFactory(FACTORY);
        }
    }

    private static final class ClosingWithReason extends PublisherCallbackChannelImpl {

        ClosingWithReason(Channel delegate, ExecutorService executor) {
            super(delegate, executor);
        }

        /**
         * Closes the channel, unless it was closed already (by the broker, or with its connection), and nacks what is
         * pending with why the channel closed, as the channel's shutdown does: whichever of the two runs first.
         */
        @Override
        public void close() throws IOException, TimeoutException {
            try {
                getDelegate().close();
            } catch (AlreadyClosedException ex) {
                // Closed before: its reason is the close's own.
            }
            ShutdownSignalException closed = getDelegate().getCloseReason();
            if (closed == null) {
                super.close();
                return;
            }
            shutdownCompleted(closed);
        }
    }
}
