package dev.exactlyonce.infra;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import org.junit.jupiter.api.Test;

/** The command line refuses what it cannot run before it touches a server, and says what it takes. */
class InfraCommandTests {

    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    @Test
    void anUnknownBenchmarkScenarioIsRefusedWithTheScenariosThereAre() {
        int status = run("bench-pipeline", "--scenarios", "guard,emitt");

        assertThat(status).isEqualTo(2);
        assertThat(this.err.toString())
                .contains("Unknown scenario 'emitt'; the scenarios are without-guard, guard, claim-by-hand, emit,")
                .contains("--scenarios <id>,...");
        assertThat(this.out.toString()).isEmpty();
    }

    @Test
    void anUnknownOptionIsRefused() {
        int status = run("bench-pipeline", "--scenario", "guard");

        assertThat(status).isEqualTo(2);
        assertThat(this.err.toString()).contains("Unexpected argument '--scenario'.");
    }

    @Test
    void theDemoRefusesAClusterOfTheOtherBroker() {
        int status = run("demo", "--binder", "rabbitmq", "--cluster", "kafka");

        assertThat(status).isEqualTo(2);
        assertThat(this.err.toString())
                .contains("--binder rabbitmq runs the shop on rabbitmq, and --cluster kafka names the other broker's");
        assertThat(this.out.toString()).isEmpty();
    }

    @Test
    void theDemoRefusesAnUnknownBinder() {
        int status = run("demo", "--binder", "pulsar");

        assertThat(status).isEqualTo(2);
        assertThat(this.err.toString()).contains("--binder takes rabbitmq or kafka, not 'pulsar'.");
        assertThat(this.out.toString()).isEmpty();
    }

    private int run(String... args) {
        return Infra.run(args, new PrintStream(this.out, true), new PrintStream(this.err, true));
    }
}
