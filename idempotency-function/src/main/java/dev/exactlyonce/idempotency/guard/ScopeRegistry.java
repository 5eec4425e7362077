package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyException;
import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.IdempotencyProperties.KeyScope;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.jdbc.Dialect;
import dev.exactlyonce.idempotency.jdbc.ProcessedEventStore;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.jdbc.BadSqlGrammarException;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Keeps the scopes of the table's claims consistent with the guarded bindings across deployments: at start-up, in one
 * transaction under a lock, it copies (not moves) a former scope's claims to the bindings that declare it, unregisters
 * retired scopes, and refuses to start over claims that no binding accounts for. See docs/reference.md, "Changing
 * scopes between deployments".
 */
final class ScopeRegistry {

    private static final Logger logger = LoggerFactory.getLogger(ScopeRegistry.class);

    private static final String LOCK = "dev.exactlyonce.idempotency.scopes";

    private static final String REGISTERED = """
            SELECT scope, copied_to FROM %s ORDER BY scope""";

    private static final String NOTE_COPIED = """
            UPDATE %s SET copied_to = ? WHERE scope = ?""";

    private static final String UNREGISTER = """
            DELETE FROM %s WHERE scope = ?""";

    private static final String HOLDS_CLAIMS = """
            SELECT EXISTS (SELECT 1 FROM %s WHERE scope = ?)""";

    private final DataSource dataSource;

    private final String tableName;

    private final String registry;

    private final IdempotencyProperties properties;

    private final Dialect dialect;

    ScopeRegistry(DataSource dataSource, IdempotencyProperties properties) {
        this.dataSource = dataSource;
        this.tableName = properties.tableName();
        this.registry = registryOf(this.tableName);
        this.properties = properties;
        this.dialect = Dialect.of(dataSource);
    }

    /** A binding's scope: the one named in {@code idempotency.bindings}, or the one {@code key-scope} gives it. */
    static String scopeOf(IdempotencyProperties properties, String bindingName, List<String> businessFunctions) {
        IdempotencyProperties.Binding settings = properties.bindings().get(bindingName);
        if (settings != null && settings.scope() != null) {
            return settings.scope();
        }
        return properties.keyScope() == KeyScope.FUNCTION ? String.join("|", businessFunctions) : "";
    }

    /**
     * The former scopes a binding alone takes over, which it claims under too ({@link ProcessedEventStore}), so that
     * both versions of a rolling deployment see each other's claims.
     */
    static List<String> takenOver(IdempotencyProperties properties, String bindingName, String scope) {
        IdempotencyProperties.Binding settings = properties.bindings().get(bindingName);
        if (settings == null) {
            return List.of();
        }
        return settings.formerScopes().stream()
                .distinct()
                .filter(former -> !former.equals(scope))
                .filter(former -> properties.bindings().entrySet().stream()
                        .noneMatch(other -> !other.getKey().equals(bindingName)
                                && other.getValue().formerScopes().contains(former)))
                .toList();
    }

    static String registryOf(String tableName) {
        return tableName + "_scope";
    }

    /**
     * Reconciles the registry with the guarded bindings, or throws {@link IdempotencyException} when
     * {@code idempotency.bindings} names a binding that is not guarded (a typo, or a rename left behind), or when the
     * table holds claims under a scope that nothing accounts for.
     */
    void reconcile(List<GuardedBinding> bindings, boolean recordsDeadLetters) {
        Map<String, String> scopes = new LinkedHashMap<>();
        Map<String, List<String>> formerScopes = new LinkedHashMap<>();
        for (GuardedBinding binding : bindings) {
            scopes.put(binding.bindingName(), binding.scope());
            IdempotencyProperties.Binding settings = this.properties.bindings().get(binding.bindingName());
            formerScopes.put(binding.bindingName(), settings != null ? settings.formerScopes() : List.of());
        }
        for (String bindingName : this.properties.bindings().keySet()) {
            if (!scopes.containsKey(bindingName)) {
                throw new StartupRefusal(
                        "idempotency.bindings.%s names no guarded binding; the guarded bindings are %s"
                                .formatted(bindingName, List.copyOf(scopes.keySet())),
                        "Rename the entry after its binding (after a function was renamed, its binding was too)");
            }
        }
        for (GuardedBinding binding : bindings) {
            for (String former : binding.takenOverScopes()) {
                if (scopes.containsValue(former)) {
                    throw new StartupRefusal(
                            ("idempotency.bindings.%s.former-scopes lists %s, which a guarded binding of this service"
                                            + " uses now: the claims of a scope in use are not copied, and claiming"
                                            + " under it would make that binding's events duplicates of this one's")
                                    .formatted(binding.bindingName(), quoted(former)),
                            "List only scopes no binding uses any more (the scope a binding had before a rename or a"
                                    + " key-scope change); for two bindings to share claims, give them one scope"
                                    + " (idempotency.bindings.<binding>.scope)");
                }
            }
        }
        // Instances starting together take turns.
        this.dialect.inTransactionLocked(this.dataSource, LOCK, this.tableName, jdbc -> {
            reconcile(jdbc, scopes, formerScopes);
            if (recordsDeadLetters) {
                requireDeadLetterRecords(jdbc);
            }
            return true;
        });
    }

    /** Without the table of dead-letter records, no message could be dead-lettered: each given back for ever. */
    private void requireDeadLetterRecords(JdbcTemplate jdbc) {
        String records = DeadLetterRecords.tableOf(this.tableName);
        if (!this.dialect.tableExists(jdbc, null, records)) {
            throw new StartupRefusal(
                    ("The table %s, where the guard records the events it dead-letters so that a replay of them is"
                                    + " taken back and nothing else is, does not exist. It is part of the library's"
                                    + " schema")
                            .formatted(records),
                    createTheSchema());
        }
        try {
            jdbc.queryForList("SELECT taken_back_at FROM " + records + " WHERE 1 = 0");
        } catch (BadSqlGrammarException ex) {
            throw new StartupRefusal(
                    ("The table %s has no column taken_back_at, where the guard marks a dead letter whose replay it"
                                    + " applied (0.1.0, migration V8__dead_letter_taken_back on PostgreSQL,"
                                    + " V6__dead_letter_taken_back on MariaDB)")
                            .formatted(records),
                    ("Let Flyway migrate it, or run ALTER TABLE %s ADD COLUMN taken_back_at %s")
                            .formatted(records, this.dialect.nullableTimestampColumn()));
        }
    }

    private String createTheSchema() {
        return ("Add spring-boot-starter-flyway and Flyway's module for the database (flyway-database-postgresql,"
                        + " flyway-mysql): with flyway-core alone Spring Boot runs no migration, and the library"
                        + " migrates its tables with the service's Flyway. Without Flyway, run"
                        + " dev/exactlyonce/idempotency/schema-%s.sql of the library's jar"
                        + " (schema-postgresql-partitioned.sql in partitioned mode)")
                .formatted(this.dialect.product().toLowerCase(Locale.ROOT));
    }

    private void reconcile(JdbcTemplate jdbc, Map<String, String> scopes, Map<String, List<String>> formerScopes) {
        if (!this.dialect.tableExists(jdbc, null, this.registry)) {
            throw new StartupRefusal(
                    ("The table %s, where the library records the scopes of the claims in %s, does not exist. It is"
                                    + " part of the library's schema")
                            .formatted(this.registry, this.tableName),
                    createTheSchema());
        }
        if (!this.dialect.keyedByName(jdbc, this.tableName)) {
            throw new StartupRefusal(
                    ("The primary key of %s does not hold event_name (version 5 of the library's schema, which keys a"
                                    + " claim by the event's id and name): every claim would fail, and every message"
                                    + " be dead-lettered")
                            .formatted(this.tableName),
                    "Let the library migrate it with the service's Flyway (spring-boot-starter-flyway), or run"
                            + " db/idempotency/postgresql-common/V5__claim_event_name.sql of the library's jar with"
                            + " ${table} replaced by " + this.tableName);
        }
        Set<String> used = new LinkedHashSet<>(scopes.values());
        Map<String, List<String>> heirs = heirs(scopes, formerScopes);
        List<String> unaccounted = new ArrayList<>();
        Map<String, String> registered = new LinkedHashMap<>();
        jdbc.query(REGISTERED.formatted(this.registry), row -> {
            registered.put(row.getString(1), row.getString(2));
        });
        for (Map.Entry<String, String> entry : registered.entrySet()) {
            String scope = entry.getKey();
            if (used.contains(scope)) {
                continue;
            }
            if (heirs.containsKey(scope)) {
                copy(jdbc, scope, heirs.get(scope));
            } else if (this.properties.retiredScopes().contains(scope)) {
                jdbc.update(UNREGISTER.formatted(this.registry), scope);
                logger.warn(
                        "Claims under scope {} of {} are retired (idempotency.retired-scopes): a copy of an event they"
                                + " recorded is processed again",
                        quoted(scope),
                        this.tableName);
            } else if (entry.getValue() != null) {
                jdbc.update(UNREGISTER.formatted(this.registry), scope);
                logger.info(
                        "Scope {} of {} is no longer declared; its claims were copied to {} and go with the retention",
                        quoted(scope),
                        this.tableName,
                        entry.getValue());
            } else if (Boolean.TRUE.equals(
                    jdbc.queryForObject(HOLDS_CLAIMS.formatted(this.tableName), Boolean.class, scope))) {
                unaccounted.add(scope);
            } else {
                jdbc.update(UNREGISTER.formatted(this.registry), scope);
            }
        }
        if (!unaccounted.isEmpty()) {
            throw unaccounted(unaccounted, scopes);
        }
        // A scope in use again records claims of its own since: whatever was copied from it no longer covers it.
        used.forEach(scope -> jdbc.update(this.dialect.registerScope(this.registry), scope));
    }

    private void copy(JdbcTemplate jdbc, String scope, List<String> heirs) {
        int copied = this.dialect.copyClaims(jdbc, this.tableName, scope, heirs);
        String targets = heirs.stream().map(ScopeRegistry::quoted).collect(Collectors.joining(", "));
        jdbc.update(NOTE_COPIED.formatted(this.registry), targets, scope);
        if (copied > 0) {
            logger.info(
                    "Copied the claims of scope {} of {} to {} ({} row(s) written)",
                    quoted(scope),
                    this.tableName,
                    targets,
                    copied);
        }
    }

    /** For each former scope, the scopes of the bindings that take it over. */
    private static Map<String, List<String>> heirs(Map<String, String> scopes, Map<String, List<String>> formerScopes) {
        Map<String, List<String>> heirs = new LinkedHashMap<>();
        formerScopes.forEach((binding, formers) -> formers.forEach(former -> {
            List<String> of = heirs.computeIfAbsent(former, key -> new ArrayList<>());
            if (!of.contains(scopes.get(binding))) {
                of.add(scopes.get(binding));
            }
        }));
        return heirs;
    }

    private StartupRefusal unaccounted(List<String> unaccounted, Map<String, String> scopes) {
        String example = scopes.keySet().iterator().next();
        return new StartupRefusal(
                ("%s holds claims under scope(s) %s, which no guarded binding uses any more (they use %s): the key"
                                + " scope changed, or a function was renamed or composed anew. A copy of an event"
                                + " claimed there (a replay, a relay's republication) would be applied a second time")
                        .formatted(
                                this.tableName,
                                unaccounted.stream().map(ScopeRegistry::quoted).collect(Collectors.joining(", ")),
                                scopes.entrySet().stream()
                                        .map(entry -> quoted(entry.getValue()) + " for " + entry.getKey())
                                        .collect(Collectors.joining(", "))),
                ("Declare which binding takes those claims over, for example %s (in YAML: former-scopes: [%s], where"
                                + " \"\" is the service scope), or, if re-processing is intended, %s. Name a binding's"
                                + " scope (idempotency.bindings.<binding>.scope) to keep it through renames")
                        .formatted(
                                indexed("idempotency.bindings." + example + ".former-scopes", unaccounted),
                                unaccounted.stream()
                                        .map(scope -> "\"" + scope + "\"")
                                        .collect(Collectors.joining(", ")),
                                indexed("idempotency.retired-scopes", unaccounted)));
    }

    /** The properties that set a list, one per element: {@code name[0]=a, name[1]=b} (an element may be empty). */
    private static String indexed(String name, List<String> values) {
        List<String> properties = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) {
            properties.add(name + "[" + i + "]=" + values.get(i));
        }
        return String.join(", ", properties);
    }

    private static String quoted(String scope) {
        return scope.isEmpty() ? "'' (the service scope)" : "'" + scope + "'";
    }
}
