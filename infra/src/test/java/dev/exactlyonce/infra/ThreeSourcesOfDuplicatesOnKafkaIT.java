package dev.exactlyonce.infra;

import dev.exactlyonce.infra.shop.ShopBroker;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.condition.EnabledIf;
import org.springframework.kafka.test.EmbeddedKafkaKraftBroker;

/**
 * {@link ThreeSourcesOfDuplicatesIT} on Kafka: the same services, from the same jars, with their kafka profile, on a
 * Kafka broker started for the class. Each event name is a topic; the broker's copies come from every service killed
 * once ({@code kill -9}), its group reading again from its last committed offsets.
 */
@EnabledIf(value = "dev.exactlyonce.infra.ShopOfTheRun#kafka", disabledReason = ShopOfTheRun.SKIPPED)
class ThreeSourcesOfDuplicatesOnKafkaIT extends ThreeSourcesOfDuplicatesIT {

    private EmbeddedKafkaKraftBroker kafka;

    @Override
    ShopBroker broker() {
        this.kafka = new EmbeddedKafkaKraftBroker(1, 3);
        this.kafka.afterPropertiesSet();
        return ShopBroker.kafka(this.kafka.getBrokersAsString(), null);
    }

    @Override
    void deleteAtExit(List<String> names) {
        // The broker goes with the class, and its topics with it.
    }

    @AfterAll
    @Override
    void stop() throws Exception {
        try {
            super.stop();
        } finally {
            if (this.kafka != null) {
                this.kafka.destroy();
            }
        }
    }
}
