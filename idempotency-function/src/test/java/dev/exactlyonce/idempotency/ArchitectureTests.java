package dev.exactlyonce.idempotency;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The library's layout as rules on its compiled classes (see the map of packages in {@code docs/design.md}): a
 * broker's API is used only in its binder's package, and nothing else uses a binder's package, which the library
 * picks by the binder a binding uses; the feature packages do not depend on each other in a cycle; the envelope
 * depends on nothing of the library.
 */
class ArchitectureTests {

    private static final String LIBRARY_PACKAGE = "dev.exactlyonce.idempotency";

    private static final JavaClasses LIBRARY = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages(LIBRARY_PACKAGE);

    private static final String[] RABBIT_API = {
        "org.springframework.amqp..", "com.rabbitmq..", "org.springframework.cloud.stream.binder.rabbit.."
    };

    private static final String[] KAFKA_API = {
        "org.springframework.kafka..", "org.apache.kafka..", "org.springframework.cloud.stream.binder.kafka.."
    };

    @Test
    void onlyRabbitsPackageUsesRabbitsApi() {
        noClasses()
                .that()
                .resideOutsideOfPackage(LIBRARY_PACKAGE + ".binder.rabbit..")
                .should()
                .dependOnClassesThat()
                .resideInAnyPackage(RABBIT_API)
                .because("the guard, the outbox and the outage halt work on any binder; what RabbitMQ needs is set"
                        + " by the classes of binder.rabbit, picked by the binder a binding uses")
                .check(LIBRARY);
    }

    @Test
    void onlyKafkasPackageUsesKafkasApi() {
        noClasses()
                .that()
                .resideOutsideOfPackage(LIBRARY_PACKAGE + ".binder.kafka..")
                .should()
                .dependOnClassesThat()
                .resideInAnyPackage(KAFKA_API)
                .because("the guard, the outbox and the outage halt work on any binder; what Kafka needs is set by"
                        + " the classes of binder.kafka, picked by the binder a binding uses")
                .check(LIBRARY);
    }

    /** A binder's package plugs into the others through their interfaces: nothing reaches into it. */
    @ParameterizedTest
    @ValueSource(strings = {"rabbit", "kafka"})
    void nothingOutsideABindersPackageUsesIt(String binder) {
        noClasses()
                .that()
                .resideOutsideOfPackage(LIBRARY_PACKAGE + ".binder." + binder + "..")
                .should()
                .dependOnClassesThat()
                .resideInAPackage(LIBRARY_PACKAGE + ".binder." + binder + "..")
                .because("a binder's classes are registered by its own auto-configuration, and the others see them"
                        + " only through the interfaces they implement")
                .check(LIBRARY);
    }

    /**
     * The packages below the root form no cycle. The root holds the API (properties, exceptions, the codec, the
     * event types), which every package uses.
     */
    @Test
    void thePackagesFormNoCycle() {
        slices().matching(LIBRARY_PACKAGE + ".(**)").should().beFreeOfCycles().check(LIBRARY);
    }

    @Test
    void theEnvelopeDependsOnNothingOfTheLibrary() {
        noClasses()
                .that()
                .resideInAPackage(LIBRARY_PACKAGE + ".envelope..")
                .should()
                .dependOnClassesThat(resideInAPackage(LIBRARY_PACKAGE + "..")
                        .and(not(resideInAPackage(LIBRARY_PACKAGE + ".envelope.."))))
                .because("the envelope is the contract with producers, which do not run the library")
                .check(LIBRARY);
    }
}
