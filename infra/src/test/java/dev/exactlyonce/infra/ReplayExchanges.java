package dev.exactlyonce.infra;

import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.exactlyonce.idempotency.test.TestRabbit;
import dev.exactlyonce.infra.shop.ShopBrokerUsers;
import java.time.Duration;

/** A queue's replay exchange in a test's topology, declared and bound as the broker's definitions do. */
final class ReplayExchanges {

    private ReplayExchanges() {}

    /**
     * Declares {@code <queue>.replay} and binds it to the queue and its dead-letter queue, once a service declared
     * them (within 60 s).
     */
    static void declareAndBind(TestRabbit rabbit, String queue) {
        String exchange = rabbit.directExchange(ShopBrokerUsers.replayExchange(queue));
        await().atMost(Duration.ofSeconds(60)).ignoreExceptions().untilAsserted(() -> {
            try (Connection admin = rabbit.newConnection();
                    Channel channel = admin.createChannel()) {
                channel.queueBind(queue, exchange, queue);
                channel.queueBind(queue + ".dlq", exchange, queue + ".dlq");
            }
        });
    }
}
