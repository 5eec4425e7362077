package dev.exactlyonce.console;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/** The console: {@code java -jar infra/console/target/console-<version>.jar}, with the services and the users in its settings. */
@SpringBootApplication
@ConfigurationPropertiesScan
public class ConsoleApplication {

    public static void main(String[] args) {
        SpringApplication.run(ConsoleApplication.class, args);
    }
}
