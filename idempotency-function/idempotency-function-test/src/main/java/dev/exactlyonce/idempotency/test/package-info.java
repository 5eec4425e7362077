/**
 * Test support for services that use the guard: a PostgreSQL database and a RabbitMQ broker of their own per test
 * run (Testcontainers when a Docker engine is available, otherwise the servers named by the environment or running
 * on localhost), and helpers that deliver events through the binder and read their effects.
 *
 * <p>Use it from tests only; its dependencies (the test binder, Testcontainers, spring-test) are optional
 * dependencies of the library that the test classpath provides.
 */
@NullMarked
package dev.exactlyonce.idempotency.test;

import org.jspecify.annotations.NullMarked;
