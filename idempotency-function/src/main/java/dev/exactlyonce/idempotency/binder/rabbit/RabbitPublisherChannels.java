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
 * Publisher channels whose nacks say why the broker closed the channel, every time. Spring AMQP nacks a closed
 * channel's pending confirms twice, with the broker's reason and with {@code Channel closed by application}, either
 * first; these nack with the close's own reason both times, so that the relay tells a refused row from a lost
 * connection. Set on the publisher factory of the outbox binder's caching connection factory, the service's other
 * publishers there included. See docs/outbox.md ("A row the broker refuses").
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
