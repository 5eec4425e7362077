package dev.exactlyonce.idempotency.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.context.annotation.Import;

/**
 * On a {@code @SpringBootTest}: provides {@link BusinessFunctionProbe}, {@link DeliveryRecorder} and
 * {@link ProcessedEvents} for injection
 * and, unless {@code testBinder = false}, runs the service's bindings on the test binder and provides
 * {@link EventDeliveries}.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@Import(IdempotencyTestKitImports.class)
public @interface EnableIdempotencyTestKit {

    /**
     * Whether the bindings run on the test binder. Set it to {@code false} in tests against a real broker, whose
     * class path then needs no test binder.
     */
    boolean testBinder() default true;
}
