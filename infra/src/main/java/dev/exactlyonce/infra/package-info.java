/** Operations around the services: the dead-letter replay command and the broker connection settings. */
@NullMarked
package dev.exactlyonce.infra;

import org.jspecify.annotations.NullMarked;
