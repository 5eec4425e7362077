package dev.exactlyonce.infra.bench;

import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;

/**
 * The service the outbox benchmark runs: the library's {@code Outbox} and its relay, and nothing else (no function is
 * bound).
 */
@SpringBootConfiguration
@EnableAutoConfiguration
class OutboxBenchmarkApplication {}
