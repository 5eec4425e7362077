package dev.exactlyonce.idempotency.guard;

import dev.exactlyonce.idempotency.IdempotencyProperties;
import dev.exactlyonce.idempotency.OutgoingEvent;
import dev.exactlyonce.idempotency.internal.FunctionDefinitions;
import dev.exactlyonce.idempotency.internal.GuardedBinding;
import dev.exactlyonce.idempotency.internal.IdempotencyMetrics;
import dev.exactlyonce.idempotency.internal.PayloadTypes;
import dev.exactlyonce.idempotency.internal.StartupRefusal;
import dev.exactlyonce.idempotency.jdbc.DeadLetterRecords;
import dev.exactlyonce.idempotency.outage.BinderGiveBack;
import dev.exactlyonce.idempotency.outage.ConflictGiveBack;
import dev.exactlyonce.idempotency.outage.ConsumptionHalt;
import dev.exactlyonce.idempotency.outage.OutageGiveBack;
import dev.exactlyonce.idempotency.outbox.Outbox;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.BeanWrapper;
import org.springframework.beans.BeanWrapperImpl;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.cloud.stream.binder.Binder;
import org.springframework.cloud.stream.binder.BinderFactory;
import org.springframework.cloud.stream.binder.ConsumerProperties;
import org.springframework.cloud.stream.binder.ExtendedPropertiesBinder;
import org.springframework.cloud.stream.config.BindingServiceProperties;
import org.springframework.cloud.stream.function.BindableFunctionProxyFactory;
import org.springframework.core.ResolvableType;
import org.springframework.core.env.Environment;
import org.springframework.messaging.MessageChannel;
import org.springframework.messaging.support.InterceptableChannel;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.ResourceTransactionManager;

/**
 * Installs the guard on each binding whose definition contains it, before the bindings consume: checks that the
 * guarantee can hold (a last function returns {@link OutgoingEvent}s, say), installs {@link TransactionPerMessage} and
 * reconciles the scopes. See docs/troubleshooting.md, "Bindings and function definition".
 */
public final class GuardInstaller implements SmartInitializingSingleton {

    private static final Logger logger = LoggerFactory.getLogger(GuardInstaller.class);

    private final ConfigurableListableBeanFactory beanFactory;

    private final BusinessFunctionDecorator decorator;

    private final ObjectProvider<DataSource> dataSources;

    private final ObjectProvider<PlatformTransactionManager> transactionManagers;

    private final IdempotencyMetrics metrics;

    private final ObjectProvider<ConsumptionHalt> outages;

    private final ObjectProvider<Outbox> outbox;

    private final String definitionProperty;

    private final IdempotencyProperties properties;

    private final ConsumerSettings binderConsumers;

    private final BinderAdapters binders;

    private final List<GuardedBinding> bindings = new ArrayList<>();

    /** Whether a guarded binding records its dead letters ({@link RecordedDeadLetters}): its table must exist. */
    private boolean recordsDeadLetters;

    GuardInstaller(
            String definitionProperty,
            IdempotencyProperties properties,
            ConfigurableListableBeanFactory beanFactory,
            BusinessFunctionDecorator decorator,
            ObjectProvider<DataSource> dataSources,
            ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<ConsumptionHalt> outages,
            ObjectProvider<Outbox> outbox,
            BinderAdapters binders,
            IdempotencyMetrics metrics) {
        this.outbox = outbox;
        this.definitionProperty = definitionProperty;
        this.properties = properties;
        this.beanFactory = beanFactory;
        this.decorator = decorator;
        this.dataSources = dataSources;
        this.transactionManagers = transactionManagers;
        this.metrics = metrics;
        this.outages = outages;
        this.binderConsumers = new ConsumerSettings(
                beanFactory.getBean(Environment.class),
                beanFactory.getBean(BindingServiceProperties.class),
                binders.consumerDefaults());
        this.binders = binders;
    }

    /** The guarded bindings found at start-up. */
    public List<GuardedBinding> bindings() {
        return Collections.unmodifiableList(this.bindings);
    }

    @Override
    public void afterSingletonsInstantiated() {
        Collection<BindableFunctionProxyFactory> bindables = this.beanFactory
                .getBeansOfType(BindableFunctionProxyFactory.class, false, false)
                .values();
        PlatformTransactionManager transactionManager = null;
        for (String definition : this.definitionProperty.split(";")) {
            List<String> parts = FunctionDefinitions.parts(definition);
            if (parts.contains(IdempotencyGuard.NAME)) {
                transactionManager = install(
                        definition.trim(),
                        parts,
                        bindable(definition, parts, bindables),
                        new ComposedFunctions(this.beanFactory, this.decorator));
            }
        }
        if (transactionManager != null) {
            new ScopeRegistry(this.dataSources.getObject(), this.properties)
                    .reconcile(this.bindings, this.recordsDeadLetters);
        }
    }

    private PlatformTransactionManager install(
            String definition, List<String> parts, BindableFunctionProxyFactory bindable, ComposedFunctions functions) {
        List<String> businessFunctions = parts.subList(1, parts.size());
        businessFunctions.forEach(name -> functions.checkDecorated(definition, name));
        Type inputType = functions.payloadType(definition, businessFunctions.get(0));
        boolean takesList = ComposedFunctions.isList(inputType);
        PayloadTypes payloadTypes = PayloadTypes.of(
                takesList ? ResolvableType.forType(inputType).getGeneric(0).getType() : inputType);
        PlatformTransactionManager transactionManager = transactionManager(definition);
        String outputDestination = functions.outputDestination(definition, businessFunctions, bindable);
        ConsumptionHalt outage = this.outages.getObject();
        boolean takesMessages = businessFunctions.stream().anyMatch(functions::takesMessage);
        for (String bindingName : bindable.getInputs()) {
            boolean batch = functions.checkBatchMode(definition, businessFunctions, bindingName, takesList);
            String scope = ScopeRegistry.scopeOf(this.properties, bindingName, businessFunctions);
            GuardedBinding binding = new GuardedBinding(
                    bindingName,
                    definition,
                    businessFunctions,
                    payloadTypes,
                    scope,
                    ScopeRegistry.takenOver(this.properties, bindingName, scope),
                    batch,
                    batch && !takesList,
                    outputDestination,
                    takesMessages,
                    routeNames(bindingName));
            guard(binding, transactionManager, outage);
        }
        return transactionManager;
    }

    private void guard(GuardedBinding binding, PlatformTransactionManager transactionManager, ConsumptionHalt outage) {
        String bindingName = binding.bindingName();
        Binder<?, ?, ?> binder = binder(bindingName);
        InterceptableChannel inputChannel = inputChannel(binding);
        EventRoutes routes = routes(binder, bindingName);
        inputChannel.addInterceptor(
                0,
                new TransactionPerMessage(
                        binding,
                        transactionManager,
                        this.dataSources.getObject(),
                        outage,
                        this.metrics,
                        this.outbox.getIfAvailable(),
                        routes));
        BinderGiveBack giveBack = this.binders.giveBackOf(binder, bindingName);
        outage.register(bindingName, giveBack != null && giveBack.countsReturns());
        interceptErrors(binding, binder, inputChannel, outage);
        if (routes != null
                && routes.movesDeadLettersBack()
                && this.properties.eventId().routeCheck()) {
            errorChannel(binder, bindingName)
                    .addInterceptor(new RecordedDeadLetters(
                            binding,
                            this.beanFactory.getBean(IdempotencyGuard.NAME, IdempotencyGuard.class),
                            routes,
                            outage,
                            giveBack,
                            DeadLetterRecords.tableOf(this.properties.tableName())));
            this.recordsDeadLetters = true;
        }
        this.binderConsumers.apply(
                binder, bindingName, binding.payloadTypes().eventNames(), errorChannel(binder, bindingName));
        this.bindings.add(binding);
        logger.info(
                "Guarding binding {} ({}): one transaction per {}, claims under scope '{}'{}, events {}",
                bindingName,
                binding.definition(),
                !binding.batch()
                        ? "message"
                        : binding.oneEventPerCall() ? "batch, the function called once per event" : "batch",
                binding.scope(),
                binding.takenOverScopes().isEmpty()
                        ? ""
                        : binding.takenOverScopes().stream()
                                .map(former -> "'" + former + "'")
                                .collect(Collectors.joining(", ", " and, while former-scopes lists them, ", "")),
                binding.payloadTypes().eventNames().isEmpty()
                        ? "of any name"
                        : binding.payloadTypes().eventNames());
    }

    private Map<String, List<String>> routeNames(String bindingName) {
        IdempotencyProperties.Binding settings = this.properties.bindings().get(bindingName);
        return settings != null ? settings.routes() : Map.of();
    }

    /** The binder's routes: none from a binder the library does not know, refused while the route check is on. */
    private @Nullable EventRoutes routes(Binder<?, ?, ?> binder, String bindingName) {
        EventRoutes routes = this.binders.routesOf(binder, bindingName);
        if (routes == null
                && binder instanceof ExtendedPropertiesBinder<?, ?, ?>
                && this.properties.eventId().routeCheck()) {
            throw new StartupRefusal(
                    ("Binding %s: its binder (%s) is not one whose routes the library reads, so an event's name could"
                                    + " not be checked against the route it arrived by: any publisher that reaches"
                                    + " its destination could send an event of any name")
                            .formatted(bindingName, binder.getClass().getName()),
                    "Use the RabbitMQ or Kafka binder, or turn the check off (idempotency.event-id.route-check=false)"
                            + " where every publisher that reaches the destination may send any event");
        }
        return routes;
    }

    /** The error channel's interceptors, in order: the give-backs, the batch splitter, the cause unwrapper. */
    private void interceptErrors(
            GuardedBinding binding, Binder<?, ?, ?> binder, InterceptableChannel inputChannel, ConsumptionHalt outage) {
        String bindingName = binding.bindingName();
        InterceptableChannel errorChannel = errorChannel(binder, bindingName);
        OutageGiveBack giveBack = new OutageGiveBack(
                outage,
                bindingName,
                this.binders.giveBackOf(binder, bindingName),
                // A delivery is settled in place only where the error channel is the library's.
                errorChannel instanceof GuardedErrorChannel ? (MessageChannel) inputChannel : null);
        errorChannel.addInterceptor(0, giveBack);
        errorChannel.addInterceptor(1, new ConflictGiveBack(bindingName, this.properties.conflicts(), giveBack));
        if (binding.batch()) {
            ConsumerProperties consumer =
                    this.beanFactory.getBean(BindingServiceProperties.class).getConsumerProperties(bindingName);
            errorChannel.addInterceptor(
                    2,
                    new FailedBatchSplitter(
                            binding,
                            (MessageChannel) inputChannel,
                            consumer,
                            outage.maxHold().dividedBy(2),
                            outage,
                            giveBack));
        }
        errorChannel.addInterceptor(new DeadLetterCauseUnwrapper());
    }

    private BindableFunctionProxyFactory bindable(
            String definition, List<String> parts, Collection<BindableFunctionProxyFactory> bindables) {
        if (!this.beanFactory.containsBean(IdempotencyGuard.NAME)) {
            throw new StartupRefusal(
                    ("'%s' needs the service's DataSource to record processed events, and there is none (or several"
                                    + " and none is @Primary)")
                            .formatted(definition.trim()),
                    "Add spring-boot-starter-jdbc and the PostgreSQL or MariaDB driver, and set spring.datasource.url;"
                            + " with several DataSources, mark the service's own @Primary");
        }
        return bindables.stream()
                .filter(bindable -> FunctionDefinitions.parts(bindable.getFunctionDefinition())
                        .equals(parts))
                .findFirst()
                .orElseThrow(() -> new StartupRefusal(
                        ("'%s' was not bound to a destination, so its messages would not run in the guard's"
                                        + " transaction")
                                .formatted(definition.trim()),
                        "Check that every function it names is a bean and that the composition is valid (a Consumer"
                                + " can only come last)"));
    }

    private PlatformTransactionManager transactionManager(String definition) {
        DataSource dataSource = this.dataSources.getObject();
        PlatformTransactionManager transactionManager = this.transactionManagers.getIfUnique();
        if (transactionManager == null) {
            throw new StartupRefusal(
                    ("'%s' needs a transaction manager for the service's DataSource, and there is none (or several and"
                                    + " none is @Primary)")
                            .formatted(definition),
                    "Keep Spring Boot's DataSourceTransactionManagerAutoConfiguration, or mark yours @Primary");
        }
        if (!bindsConnectionOf(transactionManager, dataSource)) {
            throw new StartupRefusal(
                    ("'%s': the transaction manager, a %s, does not bind the DataSource's connection to the thread, so"
                                    + " the guard's claim would not commit with the business effect (every message"
                                    + " would fail)")
                            .formatted(definition, transactionManager.getClass().getName()),
                    "Use a DataSourceTransactionManager (or a JdbcTransactionManager, or a JpaTransactionManager) on"
                            + " the DataSource the guard writes to, @Primary if there are several");
        }
        return transactionManager;
    }

    /**
     * Whether it binds a connection of the DataSource to the thread: a {@code DataSourceTransactionManager} of it, or
     * one with a {@code dataSource} property ({@code JpaTransactionManager}); a JTA transaction manager does not.
     */
    private static boolean bindsConnectionOf(PlatformTransactionManager transactionManager, DataSource dataSource) {
        if (transactionManager instanceof ResourceTransactionManager resources
                && resources.getResourceFactory() == dataSource) {
            return true;
        }
        BeanWrapper properties = new BeanWrapperImpl(transactionManager);
        return properties.isReadableProperty("dataSource") && properties.getPropertyValue("dataSource") == dataSource;
    }

    private Binder<?, ?, ?> binder(String bindingName) {
        BindingServiceProperties bindingService = this.beanFactory.getBean(BindingServiceProperties.class);
        return this.beanFactory
                .getBean(BinderFactory.class)
                .getBinder(bindingService.getBinder(bindingName), MessageChannel.class);
    }

    /**
     * The binding's error channel, {@code <binder identity>.<binding>.errors}: registered before the binder would
     * create it, so the binder's subscribers (its dead-letter handler among them) stay.
     */
    private InterceptableChannel errorChannel(Binder<?, ?, ?> binder, String bindingName) {
        String name = binder.getBinderIdentity() + "." + bindingName + ".errors";
        if (this.beanFactory.containsBean(name)) {
            return this.beanFactory.getBean(name, InterceptableChannel.class);
        }
        GuardedErrorChannel channel = new GuardedErrorChannel();
        channel.setBeanName(name);
        channel.setComponentName(name);
        channel.setBeanFactory(this.beanFactory);
        channel.afterPropertiesSet();
        this.beanFactory.registerSingleton(name, channel);
        return channel;
    }

    private InterceptableChannel inputChannel(GuardedBinding binding) {
        Object channel = this.beanFactory.getBean(binding.bindingName());
        if (!(channel instanceof InterceptableChannel interceptable)) {
            throw new StartupRefusal(
                    ("Binding %s of '%s' is a %s; the guard needs a subscribable message channel (a reactive or"
                                    + " pollable binding cannot hold a transaction per message)")
                            .formatted(
                                    binding.bindingName(),
                                    binding.definition(),
                                    channel.getClass().getName()),
                    "Bind it as a message-driven consumer, without reactive types and without a polled consumer");
        }
        return interceptable;
    }
}
