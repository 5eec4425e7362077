/** The stock service: reserves stock for each line of a placed order. */
@NullMarked
package dev.exactlyonce.stock;

import org.jspecify.annotations.NullMarked;
