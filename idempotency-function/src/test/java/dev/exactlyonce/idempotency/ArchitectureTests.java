package dev.exactlyonce.idempotency;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAnyPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The library's layout as rules on its compiled classes (see the map of packages in {@code docs/design.md}): a
 * broker's API is used only in its binder's package, and nothing else uses a binder's package, which the library
 * picks by the binder a binding uses; the packages, the root included, do not depend on each other in a cycle; the
 * root depends on the envelope only, and the envelope on nothing of the library.
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

    /** Each package of the library, the root included, as a slice of its own. */
    private static final SliceAssignment PACKAGES = new SliceAssignment() {

        @Override
        public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
            String name = javaClass.getPackageName();
            if (name.equals(LIBRARY_PACKAGE)) {
                return SliceIdentifier.of("(root)");
            }
            return name.startsWith(LIBRARY_PACKAGE + ".")
                    ? SliceIdentifier.of(name.substring(LIBRARY_PACKAGE.length() + 1))
                    : SliceIdentifier.ignore();
        }

        @Override
        public String getDescription() {
            return "the library's packages, the root included";
        }
    };

    /** The packages, the root included, form no cycle. */
    @Test
    void thePackagesFormNoCycle() {
        slices().assignedFrom(PACKAGES).should().beFreeOfCycles().check(LIBRARY);
    }

    /**
     * The root holds the API (the properties, the exceptions, the codec, the event types), which every package uses;
     * it uses none of them but the envelope, so that no cycle goes through it.
     */
    @Test
    void theRootDependsOnTheEnvelopeOnly() {
        noClasses()
                .that()
                .resideInAPackage(LIBRARY_PACKAGE)
                .should()
                .dependOnClassesThat(resideInAPackage(LIBRARY_PACKAGE + "..")
                        .and(not(resideInAnyPackage(LIBRARY_PACKAGE, LIBRARY_PACKAGE + ".envelope.."))))
                .because("the root is the API, which the packages below it implement")
                .check(LIBRARY);
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
