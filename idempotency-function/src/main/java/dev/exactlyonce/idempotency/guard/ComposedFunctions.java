package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.internal.UnbracketedBindingSettings;
import java.lang.reflect.Type;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.cloud.function.context.FunctionCatalog;
import org.springframework.cloud.function.context.catalog.FunctionTypeUtils;
import org.springframework.cloud.function.context.catalog.SimpleFunctionRegistry.FunctionInvocationWrapper;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.core.ResolvableType;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/** What a definition composes after the guard, checked at start-up: refuses what the guarantee cannot hold with. */
final class ComposedFunctions {

    private final ConfigurableListableBeanFactory beanFactory;

    private final BusinessFunctionDecorator decorator;

    private final FunctionCatalog catalog;

    private final BindingServiceProperties bindings;

    ComposedFunctions(ConfigurableListableBeanFactory beanFactory, BusinessFunctionDecorator decorator) {
        this.beanFactory = beanFactory;
        this.decorator = decorator;
        this.catalog = beanFactory.getBean(FunctionCatalog.class);
        this.bindings = beanFactory.getBean(BindingServiceProperties.class);
    }

    static boolean isList(Type type) {
        return List.class.isAssignableFrom(ResolvableType.forType(type).toClass());
    }

    /** Whether the binding delivers batches; refuses a composition that cannot take them. See docs/batch-mode.md. */
    boolean checkBatchMode(String definition, List<String> businessFunctions, String bindingName, boolean takesList) {
        boolean batchMode = this.bindings.getConsumerProperties(bindingName).isBatchMode();
        if (takesList && !batchMode) {
            throw new StartupRefusal(
                    "'%s' composes a function of a list of payloads, but binding %s does not deliver batches"
                            .formatted(definition, bindingName),
                    "Set spring.cloud.stream.bindings.%s.consumer.batch-mode=true, or take one payload"
                            .formatted(bindingName));
        }
        if (batchMode && !takesList && !(businessFunctions.size() == 1 && isConsumer(businessFunctions.get(0)))) {
            throw new StartupRefusal(
                    ("Binding %s delivers batches (batch-mode), but '%s' composes a function of one payload whose"
                                    + " results would be one per event")
                            .formatted(bindingName, definition),
                    "Take a List of payloads, or compose a single Consumer, which the library calls once per event of"
                            + " the batch");
        }
        return batchMode;
    }

    /**
     * The destination of the definition's output binding, or {@code null} for a {@code Consumer}. The result must be
     * events: anything else would be sent before the commit, for an effect that may yet roll back.
     */
    @Nullable
    String outputDestination(String definition, List<String> businessFunctions, BindableFunctionProxyFactory bindable) {
        String last = businessFunctions.get(businessFunctions.size() - 1);
        FunctionInvocationWrapper function = this.catalog.lookup(last);
        if (function == null || function.isConsumer() || bindable.getOutputs().isEmpty()) {
            return null;
        }
        Type outputType = function.getOutputType();
        if (outputType != null && FunctionTypeUtils.isMessage(outputType)) {
            outputType = FunctionTypeUtils.getGenericType(outputType);
        }
        ResolvableType output = ResolvableType.forType(outputType != null ? outputType : Object.class);
        Class<?> raw = output.resolve(Object.class);
        boolean events = raw == Object.class
                || raw == Void.class
                || OutgoingEvent.class.isAssignableFrom(raw)
                || (Iterable.class.isAssignableFrom(raw)
                        && OutgoingEvent.class.isAssignableFrom(
                                output.as(Iterable.class).getGeneric(0).resolve(OutgoingEvent.class)));
        if (!events) {
            throw new StartupRefusal(
                    ("'%s' ends with '%s', a function that returns %s. What a guarded function returns is published"
                                    + " through the outbox, after the message's transaction committed")
                            .formatted(definition, last, output),
                    "Return an OutgoingEvent (or a List<OutgoingEvent>, or null for none), or make it a Consumer that"
                            + " emits with Outbox.emit");
        }
        String outputBinding = bindable.getOutputs().iterator().next();
        String destination = this.bindings.getBindingDestination(outputBinding);
        Environment environment = this.beanFactory.getBean(Environment.class);
        if (environment.getProperty("idempotency.outbox.relay.enabled", Boolean.class, true)) {
            // The relay publishes through a binding of the destination's name: refused now, not at the first event.
            UnbracketedBindingSettings.refuse(environment, destination);
        }
        return destination;
    }

    private boolean isConsumer(String functionName) {
        FunctionInvocationWrapper function = this.catalog.lookup(functionName);
        return function != null && function.isConsumer();
    }

    void checkDecorated(String definition, String name) {
        if (!this.decorator.isDecorated(name)) {
            String found = this.beanFactory.containsBean(name)
                    ? "a " + this.beanFactory.getType(name)
                    : "no bean of that name (a FunctionRegistration or a function from another catalog)";
            throw new StartupRefusal(
                    "'%s' composes '%s' after %s, but it cannot be protected: it is %s"
                            .formatted(definition, name, IdempotencyGuard.NAME, found),
                    "Declare it as a java.util.function.Consumer or Function @Bean named '%s'".formatted(name));
        }
    }

    boolean takesMessage(String businessFunction) {
        FunctionInvocationWrapper function = this.catalog.lookup(businessFunction);
        return function != null
                && function.getInputType() != null
                && FunctionTypeUtils.isMessage(function.getInputType());
    }

    Type payloadType(String definition, String businessFunction) {
        FunctionInvocationWrapper function = this.catalog.lookup(businessFunction);
        if (function == null || function.isSupplier() || function.getInputType() == null) {
            throw new StartupRefusal(
                    "'%s' composes '%s', which takes no input".formatted(definition, businessFunction),
                    "Compose a Consumer or Function");
        }
        Type inputType = function.getInputType();
        if (FunctionTypeUtils.isPublisher(inputType)) {
            throw new StartupRefusal(
                    "'%s' composes '%s', a reactive function: its work would run after the transaction of the message ends"
                            .formatted(definition, businessFunction),
                    "Take the payload (or Message<payload>) instead of a Flux or Mono");
        }
        Type payloadType =
                FunctionTypeUtils.isMessage(inputType) ? FunctionTypeUtils.getGenericType(inputType) : inputType;
        Class<?> rawType = ResolvableType.forType(payloadType).resolve(Object.class);
        if (isText(rawType)) {
            throw new StartupRefusal(
                    ("'%s' composes '%s', a function of %s: the guard hands it the event's payload, a JSON object"
                                    + " mapped to a type, so every message would be rejected")
                            .formatted(definition, businessFunction, rawType.getSimpleName()),
                    "Take a record of the payload's fields (annotated @EventName), or a JsonNode or Map to read the"
                            + " payload as it is");
        }
        return payloadType;
    }

    /** A type a JSON object never maps to: text, bytes or a single value. */
    private static boolean isText(Class<?> type) {
        return CharSequence.class.isAssignableFrom(type)
                || type == byte[].class
                || ClassUtils.isPrimitiveOrWrapper(type)
                || Number.class.isAssignableFrom(type);
    }
}
