package dev.exactlyonce.idempotency;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The library's seams, as rules on its compiled classes: a broker's API is used only by the classes of its binder (a
 * class, or a class it is nested in, named {@code Rabbit...} or {@code Kafka...}, and the {@code kafka} package), so
 * that the guard, the outbox and the outage halt stay binder-agnostic; and the envelope depends on nothing of the
 * library.
 */
class ArchitectureTests {

    private static final JavaClasses LIBRARY = new ClassFileImporter()
            .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
            .importPackages("dev.exactlyonce.idempotency");

    /** A class of a binder's own: its name, or the name of a class it is nested in, says which. */
    private static final DescribedPredicate<JavaClass> BINDER_SPECIFIC =
            DescribedPredicate.describe("named after a binder, or in a binder's package", ArchitectureTests::ofABinder);

    @Test
    void onlyTheBindersOwnClassesUseABrokersApi() {
        noClasses()
                .that(DescribedPredicate.not(BINDER_SPECIFIC))
                .should()
                .dependOnClassesThat()
                .resideInAnyPackage(
                        "org.springframework.amqp..",
                        "com.rabbitmq..",
                        "org.springframework.kafka..",
                        "org.apache.kafka..",
                        "org.springframework.cloud.stream.binder.rabbit..",
                        "org.springframework.cloud.stream.binder.kafka..")
                .because("the guard, the outbox and the outage halt work on any binder; what one binder needs is set"
                        + " by that binder's classes, picked by the binder a binding uses")
                .check(LIBRARY);
    }

    @Test
    void theEnvelopeDependsOnNothingOfTheLibrary() {
        noClasses()
                .that()
                .resideInAPackage("dev.exactlyonce.idempotency.envelope..")
                .should()
                .dependOnClassesThat()
                .resideInAnyPackage("dev.exactlyonce.idempotency", "dev.exactlyonce.idempotency.kafka..")
                .because("the envelope is the contract with producers, which do not run the library")
                .check(LIBRARY);
    }

    private static boolean ofABinder(JavaClass type) {
        if (type.getPackageName().startsWith("dev.exactlyonce.idempotency.kafka")) {
            return true;
        }
        for (Optional<JavaClass> at = Optional.of(type);
                at.isPresent();
                at = at.get().getEnclosingClass()) {
            String name = at.get().getSimpleName();
            if (name.startsWith("Rabbit") || name.startsWith("Kafka")) {
                return true;
            }
        }
        return false;
    }
}
