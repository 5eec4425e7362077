package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;

import dev.exactlyonce.infra.shop.ShopScenario;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;
import org.springframework.beans.factory.config.YamlPropertiesFactoryBean;
import org.springframework.core.io.FileSystemResource;

/**
 * What each service's {@code application.yml} must keep for least privilege, read from the files the jars are built
 * from (the services' own tests set the ports and exchanges they need themselves, so they would not notice): Actuator
 * on a port of its own and on the loopback interface, the purge endpoint's write operation left off, and a service's broker user declaring no
 * exchange, its dead letters going through an exchange of its own.
 */
class ServicesConfigurationTests {

    static final List<ShopScenario.Service> services = ShopScenario.SERVICES;

    static final List<ShopScenario.Service> emittingServices = ShopScenario.SERVICES.stream()
            .filter(service -> !service.emits().isEmpty())
            .toList();

    @ParameterizedTest
    @FieldSource("services")
    void actuatorAnswersOnAPortOfItsOwnOnTheLoopbackInterfaceAndThePurgeIsOff(ShopScenario.Service service) {
        Properties yaml = applicationYaml(service);

        assertThat(yaml.getProperty("management.server.port"))
                .as("a management port")
                .isNotBlank()
                .isNotEqualTo(yaml.getProperty("server.port"));
        assertThat(yaml.getProperty("management.server.address"))
                .as("Actuator answering on the loopback interface only, unless the deployment says otherwise")
                .isEqualTo("127.0.0.1");
        assertThat(yaml.getProperty("management.endpoint.idempotency.access", "read-only"))
                .as("the purge left off: the endpoint read-only")
                .isIn("read-only", "READ_ONLY", "none", "NONE");
        assertThat(yaml.getProperty("management.endpoints.access.default", "read-only"))
                .as("nor opened for every endpoint")
                .isIn("read-only", "READ_ONLY", "none", "NONE");
    }

    @ParameterizedTest
    @FieldSource("services")
    void theServiceCarriesNoCredentialsAndRequiresThem(ShopScenario.Service service) {
        Properties yaml = applicationYaml(service);

        assertThat(yaml.stringPropertyNames())
                .as("no user name or password but the demo profile's, only settings a deployment must give")
                .filteredOn(name -> name.endsWith(".username") || name.endsWith(".password"))
                .allSatisfy(name -> assertThat(yaml.getProperty(name)).matches("\\$\\{[a-z.-]+}"));
        assertThat(yaml.getProperty("shop.required-settings"))
                .contains(
                        "spring.datasource.username",
                        "spring.datasource.password",
                        "spring.rabbitmq.username",
                        "spring.rabbitmq.password");
    }

    /**
     * The relay publishes the outbox through a binder of its own, as a broker user of its own, in every deployment
     * (not only the demo's profile): the service's own user may not write to the exchange, which would refuse it. Its
     * credentials have no default either: start-up names them while they are missing.
     */
    @ParameterizedTest
    @FieldSource("emittingServices")
    void anEmittingServicePublishesItsOutboxAsAUserOfItsOwn(ShopScenario.Service service) {
        Properties yaml = applicationYaml(service);
        String destination = yaml.getProperty("idempotency.outbox.destination", "events");

        String binder = yaml.getProperty("spring.cloud.stream.bindings." + destination + ".binder");
        assertThat(binder)
                .as("the binder of the outbox's binding, " + destination)
                .isNotNull();
        for (String credential : List.of("username", "password")) {
            String setting = yaml.getProperty(
                    "spring.cloud.stream.binders." + binder + ".environment.spring.rabbitmq." + credential, "");
            assertThat(setting)
                    .as("the relay's " + credential + ", a setting of its own without default")
                    .matches("\\$\\{[a-z.-]+}");
            assertThat(yaml.getProperty("shop.required-settings")).contains(setting.substring(2, setting.length() - 1));
        }
    }

    @ParameterizedTest
    @FieldSource("services")
    void theServiceDeclaresNoExchangeAndDeadLettersThroughItsOwn(ShopScenario.Service service) {
        Properties yaml = applicationYaml(service);
        String consumer = "spring.cloud.stream.rabbit.bindings." + service.binding() + ".consumer.";

        assertThat(yaml.getProperty(consumer + "declare-exchange")).isEqualTo("false");
        assertThat(yaml.getProperty(consumer + "declare-dlx")).isEqualTo("false");
        assertThat(yaml.getProperty(consumer + "dead-letter-exchange"))
                .isEqualTo("${spring.cloud.stream.bindings." + service.binding() + ".group}.dlx");
    }

    private static Properties applicationYaml(ShopScenario.Service service) {
        YamlPropertiesFactoryBean yaml = new YamlPropertiesFactoryBean();
        yaml.setResources(
                new FileSystemResource(Path.of("..", service.name(), "src", "main", "resources", "application.yml")));
        Properties properties = yaml.getObject();
        assertThat(properties).as("application.yml of " + service.name()).isNotNull();
        return properties;
    }
}
