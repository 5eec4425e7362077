/**
 * The shop around the three services: the order service that produces their events through an outbox, with the
 * failure modes that make copies, the databases and the broker topology, and the demo that runs it all.
 */
@NullMarked
package dev.exactlyonce.infra.shop;

import org.jspecify.annotations.NullMarked;
