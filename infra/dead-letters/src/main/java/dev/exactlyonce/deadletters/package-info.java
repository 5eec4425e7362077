/**
 * Dead letters on RabbitMQ, for the tools of operators: a dead letter's cause ({@link DeadLetterCause}), and its replay
 * or discard ({@link DeadLetterReplay}), used alike by the replay command and the operator console.
 */
@NullMarked
package dev.exactlyonce.deadletters;

import org.jspecify.annotations.NullMarked;
