package dev.exactlyonce.idempotency.test;

import java.util.Map;
import org.springframework.context.annotation.ImportSelector;
import org.springframework.core.type.AnnotationMetadata;

/** Imports the test kit's beans, naming the test binder's classes only when {@code testBinder} is on. */
class IdempotencyTestKitImports implements ImportSelector {

    @Override
    public String[] selectImports(AnnotationMetadata metadata) {
        Map<String, Object> attributes = metadata.getAnnotationAttributes(EnableIdempotencyTestKit.class.getName());
        boolean testBinder = attributes == null || Boolean.TRUE.equals(attributes.get("testBinder"));
        return testBinder
                ? new String[] {
                    IdempotencyTestKitConfiguration.class.getName(),
                    "org.springframework.cloud.stream.binder.test.TestChannelBinderConfiguration",
                    "dev.exactlyonce.idempotency.test.TestBinderDeliveriesConfiguration"
                }
                : new String[] {IdempotencyTestKitConfiguration.class.getName()};
    }
}
