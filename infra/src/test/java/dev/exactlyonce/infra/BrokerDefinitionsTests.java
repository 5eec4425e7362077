package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.infra.shop.ShopBrokerPolicies;
import dev.exactlyonce.infra.shop.ShopBrokerUsers;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The broker of compose.yaml has the users the demo and the tests make on a local broker, with the same permissions and
 * limits, and the same policies; each service's dead letters go through an exchange of the service's own.
 */
class BrokerDefinitionsTests {

    private final JsonNode definitions = JsonMapper.builder()
            .build()
            .readTree(Path.of("rabbitmq", "definitions.json").toFile());

    @Test
    void theDefinitionsHoldTheShopsUsersWithTheirPermissions() {
        Map<String, ShopBrokerUsers.TopicPermission> topics = this.definitions
                .path("topic_permissions")
                .valueStream()
                .collect(Collectors.toMap(
                        permission -> permission.path("user").asString(),
                        permission -> new ShopBrokerUsers.TopicPermission(
                                permission.path("exchange").asString(),
                                permission.path("write").asString(),
                                permission.path("read").asString())));
        List<ShopBrokerUsers.User> declared = this.definitions
                .path("permissions")
                .valueStream()
                .map(permission -> new ShopBrokerUsers.User(
                        permission.path("user").asString(),
                        permission.path("configure").asString(),
                        permission.path("write").asString(),
                        permission.path("read").asString(),
                        topics.get(permission.path("user").asString())))
                .toList();

        assertThat(declared).containsExactlyInAnyOrderElementsOf(ShopBrokerUsers.users(""));
    }

    @Test
    void eachServicesQueueDeadLettersThroughAnExchangeOfItsOwnToItsDeadLetterQueue() {
        for (String queue : List.of("stock.events", "shipping.events", "billing.events")) {
            String exchange = ShopBrokerUsers.deadLetterExchange(queue);
            assertThat(this.definitions.path("queues").valueStream())
                    .filteredOn(declared -> declared.path("name").asString().equals(queue))
                    .singleElement()
                    .satisfies(declared -> assertThat(declared.path("arguments")
                                    .path("x-dead-letter-exchange")
                                    .asString())
                            .isEqualTo(exchange));
            assertThat(this.definitions.path("exchanges").valueStream())
                    .filteredOn(declared -> declared.path("name").asString().equals(exchange))
                    .singleElement()
                    .satisfies(declared ->
                            assertThat(declared.path("type").asString()).isEqualTo("direct"));
            assertThat(this.definitions.path("bindings").valueStream())
                    .filteredOn(binding -> binding.path("source").asString().equals(exchange))
                    .singleElement()
                    .satisfies(binding -> {
                        assertThat(binding.path("destination").asString()).isEqualTo(queue + ".dlq");
                        assertThat(binding.path("routing_key").asString()).isEqualTo(queue);
                    });
        }
    }

    @Test
    void eachServicesQueueHasAReplayExchangeBoundToItAndItsDeadLetterQueueAlone() {
        for (String queue : List.of("stock.events", "shipping.events", "billing.events")) {
            String exchange = ShopBrokerUsers.replayExchange(queue);
            assertThat(this.definitions.path("exchanges").valueStream())
                    .filteredOn(declared -> declared.path("name").asString().equals(exchange))
                    .singleElement()
                    .satisfies(declared ->
                            assertThat(declared.path("type").asString()).isEqualTo("direct"));
            assertThat(this.definitions.path("bindings").valueStream())
                    .filteredOn(binding -> binding.path("source").asString().equals(exchange))
                    .extracting(
                            binding -> binding.path("destination").asString(),
                            binding -> binding.path("routing_key").asString())
                    .containsExactlyInAnyOrder(
                            org.assertj.core.groups.Tuple.tuple(queue, queue),
                            org.assertj.core.groups.Tuple.tuple(queue + ".dlq", queue + ".dlq"));
        }
    }

    @Test
    void noUserMayDoEverythingNorLogInWithAPasswordOfTheFile() {
        assertThat(this.definitions.path("permissions").valueStream())
                .isNotEmpty()
                .noneSatisfy(permission -> assertThat(List.of(
                                permission.path("configure").asString(),
                                permission.path("write").asString(),
                                permission.path("read").asString()))
                        .contains(".*"));
        // An empty hash: RabbitMQ refuses every password, until the deployment sets one.
        assertThat(this.definitions.path("users").valueStream()).isNotEmpty().allSatisfy(user -> {
            assertThat(user.has("password")).as(user.path("name").asString()).isFalse();
            assertThat(user.path("password_hash").asString()).isEmpty();
            assertThat(user.path("tags").valueStream()).isEmpty();
        });
        assertThat(this.definitions
                        .path("users")
                        .valueStream()
                        .map(user -> user.path("name").asString()))
                .doesNotContain("guest", "admin")
                .contains("stock", "shipping", "billing", "relay", "replay");
    }

    @Test
    void eachUserANeighbourCouldBeHasTheShopsConnectionAndChannelLimits() {
        assertThat(this.definitions.path("users").valueStream())
                .isNotEmpty()
                .allSatisfy(user -> assertThat(Map.of(
                                "max-connections",
                                        user.path("limits")
                                                .path("max-connections")
                                                .asInt(),
                                "max-channels",
                                        user.path("limits").path("max-channels").asInt()))
                        .as(user.path("name").asString())
                        .isEqualTo(Map.of(
                                "max-connections",
                                ShopBrokerUsers.MAX_CONNECTIONS,
                                "max-channels",
                                ShopBrokerUsers.MAX_CHANNELS)));
    }

    @Test
    void theDefinitionsHoldTheShopsPolicies() {
        List<ShopBrokerPolicies.Policy> declared = this.definitions
                .path("policies")
                .valueStream()
                .peek(policy -> assertThat(policy.path("apply-to").asString()).isEqualTo("queues"))
                .map(policy -> new ShopBrokerPolicies.Policy(
                        policy.path("name").asString(),
                        policy.path("pattern").asString(),
                        policy.path("definition").properties().stream()
                                .collect(Collectors.toMap(
                                        Map.Entry::getKey,
                                        entry -> entry.getValue().isString()
                                                ? (Object) entry.getValue().asString()
                                                : entry.getValue().asLong()))))
                .toList();

        assertThat(declared)
                .usingRecursiveFieldByFieldElementComparatorIgnoringFields("definition")
                .containsExactlyInAnyOrderElementsOf(ShopBrokerPolicies.policies(""));
        assertThat(declared)
                .extracting(policy -> normalised(policy.definition()))
                .containsExactlyInAnyOrderElementsOf(ShopBrokerPolicies.policies("").stream()
                        .map(policy -> normalised(policy.definition()))
                        .toList());
    }

    /** Numbers as longs, so that an int of the code and a long read from JSON compare equal. */
    private static Map<String, Object> normalised(Map<String, Object> definition) {
        return definition.entrySet().stream()
                .collect(Collectors.toMap(
                        Map.Entry::getKey,
                        entry -> entry.getValue() instanceof Number number
                                ? (Object) number.longValue()
                                : entry.getValue()));
    }
}
