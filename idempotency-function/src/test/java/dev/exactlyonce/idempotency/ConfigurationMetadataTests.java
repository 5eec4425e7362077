package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The configuration metadata the build generates (what IDEs show), and the reference that documents it: every property
 * has a description in plain sentences, and the table of docs/reference.md's Configuration section names each property
 * with its default.
 */
class ConfigurationMetadataTests {

    /** A row of the reference's table: the property, in a code span, and its default. */
    private static final Pattern ROW = Pattern.compile("^\\| `(idempotency\\.[^`]+)` \\| ([^|]+) \\|");

    private static JsonNode metadata;

    @BeforeAll
    static void readMetadata() throws IOException {
        try (InputStream in =
                ConfigurationMetadataTests.class.getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
            assertThat(in)
                    .as("the configuration metadata the annotation processor generates")
                    .isNotNull();
            metadata = JsonMapper.builder().build().readTree(in);
        }
    }

    @Test
    void everyPropertyHasADescriptionInPlainSentences() {
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

    /**
     * Each property of the reference's table is one of the metadata, with the same default; a property of a map
     * ({@code idempotency.bindings.<binding>.scope}) is one of the map's. A default the table gives in prose (what
     * another property gives) is not compared.
     */
    @Test
    void theReferenceDocumentsEachPropertyWithItsDefault() throws IOException {
        Map<String, String> documented = documentedDefaults();
        Map<String, String> generated = generatedDefaults();

        assertThat(documented).hasSizeGreaterThan(30);
        documented.forEach((name, documentedDefault) -> {
            String property = name.contains(".<") ? name.substring(0, name.indexOf(".<")) : name;
            assertThat(generated).as("docs/reference.md documents " + name).containsKey(property);
            if (name.contains(".<")) {
                // idempotency.bindings.<binding>.routes.<route>: routes is a component of the map's values.
                String component = name.substring(name.indexOf(">.") + 2).split("\\.")[0];
                assertThat(componentsOfTheValues(property))
                        .as("docs/reference.md documents " + name)
                        .contains(component);
            }
            if (!name.contains(".<") && documentedDefault.matches("`[^`]*`|none")) {
                assertThat(documentedDefault.replace("`", ""))
                        .as("the default docs/reference.md gives " + name)
                        .isEqualTo(generated.get(property));
            }
        });
    }

    @Test
    void theReferenceDocumentsEveryPropertyOfTheLibrary() throws IOException {
        Map<String, String> documented = documentedDefaults();

        assertThat(generatedDefaults().keySet())
                .filteredOn(name -> name.startsWith("idempotency."))
                .allSatisfy(name -> assertThat(documented.keySet())
                        .as("docs/reference.md's table")
                        .anyMatch(row -> row.equals(name) || row.startsWith(name + ".<")));
    }

    private static Map<String, String> documentedDefaults() throws IOException {
        Map<String, String> defaults = new LinkedHashMap<>();
        List<String> reference = Files.readAllLines(Path.of("..", "docs", "reference.md"));
        int section = reference.indexOf("## Configuration");
        assertThat(section).as("docs/reference.md's Configuration section").isNotNegative();
        for (String line : reference.subList(section + 1, reference.size())) {
            if (line.startsWith("#")) {
                break;
            }
            Matcher row = ROW.matcher(line);
            if (row.find()) {
                defaults.put(row.group(1), row.group(2).strip());
            }
        }
        return defaults;
    }

    /** The properties of the values of the map {@code property}: its value record's components, in kebab case. */
    private static List<String> componentsOfTheValues(String property) {
        for (JsonNode node : metadata.path("properties")) {
            if (node.path("name").asString().equals(property)) {
                String type = node.path("type").asString();
                String valueType = type.substring(type.indexOf(',') + 1, type.length() - 1);
                try {
                    return Stream.of(Class.forName(valueType).getRecordComponents())
                            .map(component -> component
                                    .getName()
                                    .replaceAll("([A-Z])", "-$1")
                                    .toLowerCase(Locale.ROOT))
                            .toList();
                } catch (ClassNotFoundException ex) {
                    throw new AssertionError("The values of " + property + " are a " + valueType, ex);
                }
            }
        }
        throw new AssertionError("No property " + property + " in the metadata");
    }

    /** Each property's default as the metadata gives it, {@code none} where it gives none. */
    private static Map<String, String> generatedDefaults() {
        Map<String, String> defaults = new TreeMap<>();
        for (JsonNode property : metadata.path("properties")) {
            JsonNode value = property.path("defaultValue");
            defaults.put(property.path("name").asString(), value.isMissingNode() ? "none" : value.asString());
        }
        return defaults;
    }
}
