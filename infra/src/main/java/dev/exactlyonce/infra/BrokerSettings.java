package dev.exactlyonce.infra;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.TimeoutException;

/**
 * Where RabbitMQ is, read from the same variables the services read: {@code SPRING_RABBITMQ_HOST},
 * {@code SPRING_RABBITMQ_PORT}, {@code SPRING_RABBITMQ_USERNAME}, {@code SPRING_RABBITMQ_PASSWORD},
 * {@code SPRING_RABBITMQ_VIRTUAL_HOST}; by default {@code localhost:5672} as {@code guest}.
 */
record BrokerSettings(String host, int port, String username, String password, String virtualHost) {

    static BrokerSettings fromEnvironment(Map<String, String> env) {
        return new BrokerSettings(
                env.getOrDefault("SPRING_RABBITMQ_HOST", "localhost"),
                Integer.parseInt(env.getOrDefault("SPRING_RABBITMQ_PORT", "5672")),
                env.getOrDefault("SPRING_RABBITMQ_USERNAME", "guest"),
                env.getOrDefault("SPRING_RABBITMQ_PASSWORD", "guest"),
                env.getOrDefault("SPRING_RABBITMQ_VIRTUAL_HOST", "/"));
    }

    Connection connect(String clientName) throws IOException, TimeoutException {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(this.host);
        factory.setPort(this.port);
        factory.setUsername(this.username);
        factory.setPassword(this.password);
        factory.setVirtualHost(this.virtualHost);
        return factory.newConnection(clientName);
    }

    @Override
    public String toString() {
        return "amqp://%s@%s:%d%s".formatted(this.username, this.host, this.port, this.virtualHost);
    }
}
