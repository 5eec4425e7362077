/** The billing service: invoices each placed order and charges it at the payment provider. */
@NullMarked
package dev.exactlyonce.billing;

import org.jspecify.annotations.NullMarked;
