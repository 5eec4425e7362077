/**
 * The operator console: a web application that reads the services' Actuator endpoints ({@code health},
 * {@code idempotency}, {@code outbox}) and shows, for operators who may only look (viewer) and those who may act
 * (operator), each service's state, an event's fate across the services, and the outbox rows its relay parked.
 */
@NullMarked
package dev.exactlyonce.console;

import org.jspecify.annotations.NullMarked;
