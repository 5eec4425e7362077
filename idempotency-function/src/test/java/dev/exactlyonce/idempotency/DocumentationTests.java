package dev.exactlyonce.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The README and docs/ against the repository: the README's getting-started is the example's code (each code block it
 * marks with {@code <!-- snippet: path -->} is a run of lines of that file, indentation aside, so that what a newcomer
 * copies is what CI builds and tests), and every relative link reaches a file, and a heading where it names one.
 */
class DocumentationTests {

    private static final Path ROOT = Path.of("..");

    private static final String MARK = "<!-- snippet: ";

    /** A Markdown link to a path of the repository, with the heading it names, if any. */
    private static final Pattern LINK = Pattern.compile("\\]\\((?!https?:)([^)#\\s]*)(?:#([^)\\s]+))?\\)");

    @Test
    void everyMarkedSnippetOfTheReadmeIsARunOfLinesOfItsFile() throws IOException {
        List<String> readme = Files.readAllLines(ROOT.resolve("README.md"));
        int snippets = 0;
        for (int i = 0; i < readme.size(); i++) {
            if (readme.get(i).startsWith(MARK)) {
                String path =
                        readme.get(i).substring(MARK.length(), readme.get(i).indexOf(" -->"));
                List<String> snippet = block(readme, i + 1);
                assertThat(snippet)
                        .as("README.md line %d: the snippet's code block", i + 1)
                        .isNotEmpty();
                assertThat(isRunOf(snippet, Files.readAllLines(ROOT.resolve(path))))
                        .as("README.md line %d: the snippet is a run of lines of %s", i + 1, path)
                        .isTrue();
                snippets++;
            }
        }
        assertThat(snippets).as("the README's marked snippets").isGreaterThanOrEqualTo(5);
    }

    @Test
    void everyRelativeLinkReachesAFileAndItsHeading() throws IOException {
        List<Path> pages = new ArrayList<>(List.of(ROOT.resolve("README.md")));
        try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
            docs.filter(path -> path.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        int links = 0;
        for (Path page : pages) {
            List<String> lines = prose(Files.readAllLines(page));
            for (int i = 0; i < lines.size(); i++) {
                Matcher link = LINK.matcher(lines.get(i));
                while (link.find()) {
                    Path target = link.group(1).isEmpty()
                            ? page
                            : page.getParent().resolve(link.group(1)).normalize();
                    String where = "%s line %d: %s".formatted(ROOT.relativize(page), i + 1, link.group());
                    assertThat(target).as(where).exists();
                    if (link.group(2) != null && target.toString().endsWith(".md")) {
                        assertThat(headings(target)).as(where).contains(link.group(2));
                    }
                    links++;
                }
            }
        }
        assertThat(links).as("the links of the README and docs/").isGreaterThan(50);
    }

    /** The page's lines outside its code blocks, each code block's lines left blank. */
    private static List<String> prose(List<String> lines) {
        List<String> prose = new ArrayList<>();
        boolean code = false;
        for (String line : lines) {
            boolean fence = line.strip().startsWith("```");
            if (fence) {
                code = !code;
            }
            prose.add(code || fence ? "" : line);
        }
        return prose;
    }

    /** The anchors of the page's headings, as GitHub makes them. */
    private static Set<String> headings(Path page) throws IOException {
        return prose(Files.readAllLines(page)).stream()
                .filter(line -> line.startsWith("#"))
                .map(line -> line.replaceFirst("^#+\\s*", "")
                        .toLowerCase(Locale.ROOT)
                        .replaceAll("[^\\w\\- ]", "")
                        .replace(' ', '-'))
                .collect(Collectors.toSet());
    }

    /** The lines of the fenced code block that starts on line {@code fence}, without their common indentation. */
    private static List<String> block(List<String> lines, int fence) {
        assertThat(lines.get(fence).strip())
                .as("a code block after the snippet's mark")
                .startsWith("```");
        List<String> block = new ArrayList<>();
        for (int i = fence + 1; !lines.get(i).strip().startsWith("```"); i++) {
            block.add(lines.get(i));
        }
        int indent = block.stream()
                .filter(line -> !line.isBlank())
                .mapToInt(line -> line.length() - line.stripLeading().length())
                .min()
                .orElse(0);
        return block.stream()
                .map(line -> line.isBlank() ? "" : line.substring(indent))
                .toList();
    }

    /**
     * Whether the snippet's lines are consecutive lines of the file, each indented alike in the file (a block of the
     * file's indented deeper as a whole, such as a dependency inside a profile, is one).
     */
    private static boolean isRunOf(List<String> snippet, List<String> file) {
        String first = snippet.get(0);
        for (int start = 0; start + snippet.size() <= file.size(); start++) {
            String line = file.get(start);
            if (!line.endsWith(first)
                    || !line.substring(0, line.length() - first.length()).isBlank()) {
                continue;
            }
            String indent = line.substring(0, line.length() - first.length());
            boolean run = true;
            for (int k = 0; run && k < snippet.size(); k++) {
                String expected = snippet.get(k);
                String actual = file.get(start + k);
                run = expected.isEmpty() ? actual.isBlank() : actual.equals(indent + expected);
            }
            if (run) {
                return true;
            }
        }
        return false;
    }
}
