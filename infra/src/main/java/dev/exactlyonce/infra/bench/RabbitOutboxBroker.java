package dev.exactlyonce.infra.bench;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * RabbitMQ, from {@code SPRING_RABBITMQ_HOST}, {@code SPRING_RABBITMQ_PORT}, {@code SPRING_RABBITMQ_USERNAME} and
 * {@code SPRING_RABBITMQ_PASSWORD} (default {@code localhost:5672}, {@code guest}): topic exchanges, the refusing one's
 * only queue full ({@code x-max-length} 0, {@code reject-publish}); publisher confirms.
 */
final class RabbitOutboxBroker implements OutboxBroker {

    private final Map<String, String> env;

    private @Nullable Connection connection;

    RabbitOutboxBroker(Map<String, String> env) {
        this.env = env;
    }

    @Override
    public String describe() {
        return "RabbitMQ %s:%s, publisher confirms".formatted(host(), port());
    }

    @Override
    public void start(String destination, String refusing, Arrivals arrivals) throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(host());
        factory.setPort(Integer.parseInt(port()));
        factory.setUsername(user());
        factory.setPassword(password());
        this.connection = factory.newConnection("bench-outbox");
        Channel channel = this.connection.createChannel();
        channel.exchangeDeclare(destination, "topic", false, true, null);
        // Every publication to this exchange is refused: its only queue is full and rejects what it is given.
        channel.exchangeDeclare(refusing, "topic", false, true, null);
        String full = channel.queueDeclare(
                        "", false, true, true, Map.of("x-max-length", 0, "x-overflow", "reject-publish"))
                .getQueue();
        channel.queueBind(full, refusing, "#");
        String queue = channel.queueDeclare().getQueue();
        channel.queueBind(queue, destination, "#");
        channel.basicConsume(queue, true, new DefaultConsumer(channel) {
            @Override
            public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] body) {
                arrivals.arrived(properties.getMessageId());
            }
        });
    }

    @Override
    public List<String> properties(String destination, String refusing) {
        return List.of(
                "spring.cloud.stream.default-binder=rabbit",
                "spring.rabbitmq.host=" + host(),
                "spring.rabbitmq.port=" + port(),
                "spring.rabbitmq.username=" + user(),
                "spring.rabbitmq.password=" + password(),
                "spring.cloud.stream.rabbit.bindings[" + destination + "].producer.declare-exchange=false",
                "spring.cloud.stream.rabbit.bindings[" + refusing + "].producer.declare-exchange=false");
    }

    @Override
    public void close() throws Exception {
        if (this.connection != null) {
            this.connection.close();
        }
    }

    private String host() {
        return this.env.getOrDefault("SPRING_RABBITMQ_HOST", "localhost");
    }

    private String port() {
        return this.env.getOrDefault("SPRING_RABBITMQ_PORT", "5672");
    }

    private String user() {
        return this.env.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest");
    }

    private String password() {
        return this.env.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest");
    }
}
