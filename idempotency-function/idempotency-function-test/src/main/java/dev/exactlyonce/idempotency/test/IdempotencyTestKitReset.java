package dev.exactlyonce.idempotency.test;

import org.jspecify.annotations.Nullable;
import org.springframework.context.ApplicationContext;
import org.springframework.core.Ordered;
import org.springframework.test.context.TestContext;
import org.springframework.test.context.support.AbstractTestExecutionListener;

/**
 * Gives each test method the test kit as new, in a context cached across test classes: before the method, the probe
 * forgets its counts and pending failures, the recorder its attempts, the deliveries their last error (a stale error
 * of an earlier test would satisfy the next test's check that a message failed); after it, an action the test asked
 * to run after a commit that never ran fails the test ({@link DeliveryRecorder#reset}). Registered for every test
 * through {@code META-INF/spring.factories}; it does nothing in a context without the kit.
 */
final class IdempotencyTestKitReset extends AbstractTestExecutionListener {

    @Override
    public int getOrder() {
        return Ordered.LOWEST_PRECEDENCE - 100;
    }

    @Override
    public void beforeTestMethod(TestContext testContext) {
        ApplicationContext context = kitContext(testContext);
        if (context == null) {
            return;
        }
        context.getBeanProvider(BusinessFunctionProbe.class).ifAvailable(BusinessFunctionProbe::reset);
        context.getBeanProvider(DeliveryRecorder.class).ifAvailable(DeliveryRecorder::reset);
        context.getBeanProvider(EventDeliveries.class).ifAvailable(EventDeliveries::resetLastError);
    }

    @Override
    public void afterTestMethod(TestContext testContext) {
        ApplicationContext context = kitContext(testContext);
        if (context != null) {
            context.getBeanProvider(DeliveryRecorder.class).ifAvailable(DeliveryRecorder::reset);
        }
    }

    private static @Nullable ApplicationContext kitContext(TestContext testContext) {
        return testContext.hasApplicationContext() ? testContext.getApplicationContext() : null;
    }
}
