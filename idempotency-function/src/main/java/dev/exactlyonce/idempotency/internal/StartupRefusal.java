package dev.exactlyonce.idempotency.internal;

import dev.exactlyonce.idempotency.IdempotencyException;
import org.jspecify.annotations.Nullable;

/**
 * Start-up stops because the guard's guarantee could not hold: what is wrong, and what to do about it. Its message is
 * both, for any log; Spring Boot reports them as its Description and Action ({@link StartupRefusalFailureAnalyzer}).
 */
public final class StartupRefusal extends IdempotencyException {

    private static final long serialVersionUID = 1L;

    private final String description;

    private final String action;

    /**
     * @param description what is wrong, and why it matters (one or more sentences, without the final full stop)
     * @param action what to set or change (one or more sentences, without the final full stop)
     */
    public StartupRefusal(String description, String action) {
        this(description, action, null);
    }

    public StartupRefusal(String description, String action, @Nullable Throwable cause) {
        super(description + ". " + action, cause);
        this.description = description;
        this.action = action;
    }

    String description() {
        return this.description + ".";
    }

    /** Without a full stop: it often ends with a property's value, to copy. */
    public String action() {
        return this.action;
    }
}
