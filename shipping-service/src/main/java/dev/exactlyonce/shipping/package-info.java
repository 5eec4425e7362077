/** The shipping service: keeps a copy of each order's status, newest version wins. */
@NullMarked
package dev.exactlyonce.shipping;

import org.jspecify.annotations.NullMarked;
