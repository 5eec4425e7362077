package dev.exactlyonce.infra.shop;

import dev.exactlyonce.idempotency.test.TestKafkaCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.jspecify.annotations.Nullable;

/**
 * The shop on Kafka, with the services' {@code kafka} profile: each event name is a topic of the run (keyed by order
 * id), a service's group reads the topics of the events it handles and dead-letters to a topic of its own; a run with
 * a suffix declares its topics as the routes of their events ({@code idempotency.bindings.<binding>.routes}). The run
 * makes every topic, with {@value #PARTITIONS} partitions and a replica on up to three brokers, after deleting what an
 * earlier run of its name left (topics and groups). The services connect without users of their own: docs/shop.md
 * gives the ACLs a deployment grants each.
 */
final class KafkaShopBroker implements ShopBroker {

    private static final int PARTITIONS = 3;

    /** How long an administration call may take; on a cluster losing a broker, it is asked again. */
    private static final Duration CALL = Duration.ofSeconds(15);

    private final String brokers;

    private final @Nullable TestKafkaCluster cluster;

    private String suffix = "";

    private @Nullable Admin admin;

    KafkaShopBroker(String brokers, @Nullable TestKafkaCluster cluster) {
        this.brokers = brokers;
        this.cluster = cluster;
    }

    @Override
    public String describe() {
        return (cluster() ? "Kafka cluster " : "Kafka ") + this.brokers;
    }

    @Override
    public String prepare(String suffix) throws Exception {
        this.suffix = suffix;
        this.admin = Admin.create(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                this.brokers,
                AdminClientConfig.CLIENT_ID_CONFIG,
                "shop-administration",
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                (int) CALL.toMillis(),
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG,
                (int) CALL.toMillis()));
        // Only the groups an earlier run left: asked to delete a group it does not know, a fresh broker's coordinator
        // logs errors until it has loaded.
        Set<String> groups = admin().listGroups().all().get(CALL.toSeconds(), TimeUnit.SECONDS).stream()
                .map(GroupListing::groupId)
                .collect(Collectors.toCollection(LinkedHashSet::new));
        groups.retainAll(ShopScenario.SERVICES.stream()
                .map(service -> service.queue(suffix))
                .toList());
        for (String group : groups) {
            try {
                admin().deleteConsumerGroups(List.of(group)).all().get(CALL.toSeconds(), TimeUnit.SECONDS);
            } catch (ExecutionException ex) {
                if (!(ex.getCause() instanceof GroupIdNotFoundException)) {
                    throw new IllegalStateException(
                            ("Could not delete the consumer group %s of an earlier run (%s): is a service of it still"
                                            + " running?")
                                    .formatted(group, ex.getCause()),
                            ex);
                }
            }
        }
        List<String> topics = topics();
        Set<String> left = new LinkedHashSet<>(admin().listTopics().names().get(CALL.toSeconds(), TimeUnit.SECONDS));
        left.retainAll(topics);
        if (!left.isEmpty()) {
            admin().deleteTopics(left).all().get(CALL.toSeconds(), TimeUnit.SECONDS);
        }
        Collection<Node> nodes = admin().describeCluster().nodes().get(CALL.toSeconds(), TimeUnit.SECONDS);
        short replicas = (short) Math.min(3, nodes.size());
        create(topics, replicas);
        return ("topics %s, each of %d partitions with %d replica(s), none left from an earlier run; the services"
                        + " connect without users of their own (docs/shop.md gives the ACLs a deployment grants each)")
                .formatted(String.join(", ", topics), PARTITIONS, replicas);
    }

    @Override
    public List<String> serviceProperties(ShopScenario.Service service) {
        String queue = service.queue(this.suffix);
        List<String> properties = new ArrayList<>(List.of(
                "spring.profiles.active=kafka",
                "spring.cloud.stream.kafka.binder.brokers=" + this.brokers,
                "spring.cloud.stream.bindings." + service.binding() + ".destination="
                        + String.join(
                                ",", service.events().stream().map(this::topic).toList()),
                "spring.cloud.stream.bindings." + service.binding() + ".group=" + queue,
                "spring.cloud.stream.kafka.bindings." + service.binding() + ".consumer.dlq-name=" + queue + ".dlq",
                // A killed consumer's partitions wait for another until its session times out: 10 s, not 45.
                "spring.cloud.stream.kafka.binder.consumer-properties.session.timeout.ms=10000"));
        if (!service.emits().isEmpty()) {
            properties.add(
                    "idempotency.outbox.destination=" + topic(service.emits().get(0)));
        }
        if (!this.suffix.isEmpty()) {
            // The guard takes an event only from the topic of its name, or one the binding declares for it.
            service.events()
                    .forEach(event -> properties.add(
                            "idempotency.bindings." + service.binding() + ".routes[" + topic(event) + "]=" + event));
        }
        return properties;
    }

    @Override
    public List<String> orderServiceProperties() {
        return List.of(
                "spring.cloud.stream.default-binder=kafka",
                "spring.cloud.stream.kafka.binder.brokers=" + this.brokers,
                "idempotency.outbox.destination=" + topic(OrderService.PLACED),
                // The run says what the brokers do; Kafka's clients of this process would warn of every broker lost.
                "logging.level.org.apache.kafka=ERROR");
    }

    @Override
    public String destination(String eventName) {
        return topic(eventName);
    }

    /** Whether every service's consumer has joined its group and been given partitions. */
    @Override
    public boolean servicesReady() {
        List<String> groups = ShopScenario.SERVICES.stream()
                .map(service -> service.queue(this.suffix))
                .toList();
        try {
            return admin()
                    .describeConsumerGroups(groups)
                    .all()
                    .get(CALL.toSeconds(), TimeUnit.SECONDS)
                    .values()
                    .stream()
                    .allMatch(group -> group.groupState() == GroupState.STABLE
                            && !group.members().isEmpty());
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            return false;
        } catch (ExecutionException | TimeoutException ex) {
            return false;
        }
    }

    @Override
    public void servicesStarted() {
        // Nothing to bind: the services' groups read their topics.
    }

    @Override
    public int queued(ShopScenario.Service service) throws Exception {
        return asked(() -> {
            Map<TopicPartition, OffsetAndMetadata> committed = admin().listConsumerGroupOffsets(
                            service.queue(this.suffix))
                    .partitionsToOffsetAndMetadata()
                    .get(CALL.toSeconds(), TimeUnit.SECONDS);
            Map<TopicPartition, Long> ends =
                    ends(service.events().stream().map(this::topic).toList());
            long lag = 0;
            for (Map.Entry<TopicPartition, Long> end : ends.entrySet()) {
                OffsetAndMetadata offset = committed.get(end.getKey());
                lag += end.getValue() - (offset != null ? offset.offset() : 0);
            }
            return (int) lag;
        });
    }

    @Override
    public int deadLetters(ShopScenario.Service service) throws Exception {
        return asked(() -> (int) ends(List.of(service.queue(this.suffix) + ".dlq")).values().stream()
                .mapToLong(Long::longValue)
                .sum());
    }

    @Override
    public boolean dropConnections() {
        return false;
    }

    @Override
    public boolean cluster() {
        return this.cluster != null;
    }

    @Override
    public Leader leaderOf(ShopScenario.Service service) throws Exception {
        String topic = topic(service.events().get(0));
        return asked(() -> {
            Node leader = admin()
                    .describeTopics(List.of(topic))
                    .allTopicNames()
                    .get(CALL.toSeconds(), TimeUnit.SECONDS)
                    .get(topic)
                    .partitions()
                    .stream()
                    .filter(partition -> partition.partition() == 0)
                    .findFirst()
                    .orElseThrow()
                    .leader();
            if (leader == null || leader.isEmpty()) {
                throw new IllegalStateException("The first partition of " + topic + " has no leader");
            }
            return new Leader(leader.id(), "the first partition of " + topic);
        });
    }

    @Override
    public String nodeName() {
        return "Kafka broker";
    }

    @Override
    public void control(String... arguments) {
        if (this.cluster == null) {
            throw new IllegalStateException(
                    "A Kafka of " + this.brokers + " is no cluster of infra/cluster.sh to act" + " on");
        }
        this.cluster.control(arguments);
    }

    @Override
    public List<String> names() {
        return topics();
    }

    @Override
    public void dropUsers() {
        // None made.
    }

    @Override
    public void close() {
        if (this.admin != null) {
            this.admin.close(Duration.ofSeconds(5));
        }
    }

    /** The topics of the run: one per event name, one per service's dead letters. */
    private List<String> topics() {
        Set<String> topics = new LinkedHashSet<>();
        ShopScenario.SERVICES.forEach(service -> service.events().forEach(event -> topics.add(topic(event))));
        ShopScenario.SERVICES.forEach(service -> topics.add(service.queue(this.suffix) + ".dlq"));
        return List.copyOf(topics);
    }

    private String topic(String eventName) {
        return eventName + this.suffix;
    }

    /** Creates the topics, asking again (up to a minute) while the deletion of an earlier run's is under way. */
    private void create(List<String> topics, short replicas) throws Exception {
        long deadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
        List<String> missing = new ArrayList<>(topics);
        while (!missing.isEmpty()) {
            Map<String, KafkaFuture<Void>> created = admin().createTopics(missing.stream()
                            .map(topic -> new NewTopic(topic, PARTITIONS, replicas))
                            .toList())
                    .values();
            List<String> again = new ArrayList<>();
            for (Map.Entry<String, KafkaFuture<Void>> topic : created.entrySet()) {
                try {
                    topic.getValue().get(CALL.toSeconds(), TimeUnit.SECONDS);
                } catch (ExecutionException ex) {
                    if (!(ex.getCause() instanceof TopicExistsException) || System.nanoTime() > deadline) {
                        throw ex;
                    }
                    again.add(topic.getKey());
                }
            }
            missing = again;
            if (!missing.isEmpty()) {
                // Kafka deletes a topic in the background: nothing tells when its name is free again.
                Thread.sleep(500);
            }
        }
    }

    /** The end offset of every partition of the topics: as they are made fresh by the run, its records. */
    private Map<TopicPartition, Long> ends(List<String> topics) throws Exception {
        Map<TopicPartition, OffsetSpec> latest = topics.stream()
                .flatMap(topic ->
                        IntStream.range(0, PARTITIONS).mapToObj(partition -> new TopicPartition(topic, partition)))
                .collect(Collectors.toMap(Function.identity(), partition -> OffsetSpec.latest()));
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> offsets =
                admin().listOffsets(latest).all().get(CALL.toSeconds(), TimeUnit.SECONDS);
        return offsets.entrySet().stream()
                .collect(Collectors.toMap(
                        Map.Entry::getKey, entry -> entry.getValue().offset()));
    }

    /** Asks the brokers; on a cluster, again (up to a minute) while a broker lost leaves a call unanswered. */
    private <T> T asked(Callable<T> call) throws Exception {
        long deadline = System.nanoTime() + Duration.ofMinutes(1).toNanos();
        while (true) {
            try {
                return call.call();
            } catch (Exception ex) {
                if (!cluster() || System.nanoTime() > deadline) {
                    throw ex;
                }
                // A call that failed while a broker was lost: the client finds the partitions' new leaders meanwhile.
                Thread.sleep(500);
            }
        }
    }

    private Admin admin() {
        if (this.admin == null) {
            throw new IllegalStateException("The broker is not prepared for a run yet");
        }
        return this.admin;
    }
}
