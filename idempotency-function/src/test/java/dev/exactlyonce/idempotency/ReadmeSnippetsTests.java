package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The README's getting-started is the example's code: each code block the README marks with
 * {@code <!-- snippet: path -->} is a run of lines of that file (indentation aside), so that what a newcomer copies is
 * what CI builds and tests.
 */
class ReadmeSnippetsTests {

    private static final Path ROOT = Path.of("..");

    private static final String MARK = "<!-- snippet: ";

    @Test
    void everyMarkedSnippetIsARunOfLinesOfItsFile() throws IOException {
        List<String> readme = Files.readAllLines(ROOT.resolve("README.md"));
        int snippets = 0;
        for (int i = 0; i < readme.size(); i++) {
            if (readme.get(i).startsWith(MARK)) {
                String path =
                        readme.get(i).substring(MARK.length(), readme.get(i).indexOf(" -->"));
                List<String> snippet = block(readme, i + 1);
                List<String> file = stripped(Files.readAllLines(ROOT.resolve(path)));
                assertThat(Collections.indexOfSubList(file, stripped(snippet)))
                        .as("README.md line %d: the snippet is a run of lines of %s", i + 1, path)
                        .isNotNegative();
                snippets++;
            }
        }
        assertThat(snippets).as("the README's marked snippets").isGreaterThanOrEqualTo(5);
    }

    /** The lines of the fenced code block that starts on line {@code fence}. */
    private static List<String> block(List<String> lines, int fence) {
        assertThat(lines.get(fence)).as("a code block after the snippet's mark").startsWith("```");
        List<String> block = new ArrayList<>();
        for (int i = fence + 1; !lines.get(i).startsWith("```"); i++) {
            block.add(lines.get(i));
        }
        return block;
    }

    private static List<String> stripped(List<String> lines) {
        return lines.stream().map(String::strip).toList();
    }
}
