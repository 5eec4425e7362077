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
 * Publisher channels whose nacks say why the broker closed the channel, so that the relay tells a refused row from a
 * lost connection: Spring AMQP nacks a closed channel's pending confirms twice, either reason first.
 */
final class RabbitPublisherChannels {

    private static final PublisherCallbackChannelFactory FACTORY = ClosingWithReason::new;

    private RabbitPublisherChannels() {}

    /** Sets these channels on the factory's publisher factory, or on the factory when it has none; not on consumers. */
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
