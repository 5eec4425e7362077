package dev.exactlyonce.idempotency.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.cloud.stream.binder.test.EnableTestBinder;
import org.springframework.context.annotation.Import;

/**
 * On a {@code @SpringBootTest}: runs the service's bindings on the test binder and provides
 * {@link EventDeliveries}, {@link BusinessFunctionProbe} and {@link ProcessedEvents} for injection.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@EnableTestBinder
@Import(IdempotencyTestKitConfiguration.class)
public @interface EnableIdempotencyTestKit {}
