package dev.exactlyonce.idempotency.internal;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.core.type.AnnotatedTypeMetadata;

/** Matches when {@code spring.cloud.function.definition} composes the guard: the service uses its table. */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.TYPE, ElementType.METHOD})
@Conditional(ConditionalOnGuardedDefinition.OnGuardedDefinition.class)
public @interface ConditionalOnGuardedDefinition {

    final class OnGuardedDefinition extends SpringBootCondition {

        @Override
        public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
            String property = context.getEnvironment().getProperty(FunctionDefinitions.PROPERTY, "");
            return FunctionDefinitions.namesGuard(property)
                    ? ConditionOutcome.match("a function definition composes " + FunctionDefinitions.GUARD)
                    : ConditionOutcome.noMatch("no function definition composes " + FunctionDefinitions.GUARD);
        }
    }
}
