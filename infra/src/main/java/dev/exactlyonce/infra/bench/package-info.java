/** Benchmarks: commands that print figures, run side by side in one run so that their ratios mean something. */
@NullMarked
package dev.exactlyonce.infra.bench;

import org.jspecify.annotations.NullMarked;
