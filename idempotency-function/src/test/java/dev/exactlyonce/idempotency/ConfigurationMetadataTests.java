package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The property descriptions IDEs show, from the configuration metadata the build generates: every property has one,
 * written as plain sentences (a capital, a full stop, no Javadoc tag shown literally).
 */
class ConfigurationMetadataTests {

    @Test
    void everyPropertyHasADescriptionInPlainSentences() throws IOException {
        JsonNode metadata;
        try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in)
                    .as("the configuration metadata the annotation processor generates")
                    .isNotNull();
            metadata = JsonMapper.builder().build().readTree(in);
        }

        assertThat(metadata.path("properties").size()).isGreaterThan(30);
        for (JsonNode property : metadata.path("properties")) {
            String description = property.path("description").asString("");
            assertThat(description)
                    .as(property.path("name").asString())
                    .isNotBlank()
                    .matches("(?s)^[A-Z].*\\.$")
                    .doesNotContain("{@", "<");
        }
    }
}
