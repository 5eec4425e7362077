package dev.exactlyonce.idempotency.internal;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Reports a {@link StartupRefusal} as Spring Boot's Description and Action, instead of a stack trace. */
class StartupRefusalFailureAnalyzer extends AbstractFailureAnalyzer<StartupRefusal> {

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, StartupRefusal cause) {
        return new FailureAnalysis(cause.description(), cause.action(), cause);
    }
}
