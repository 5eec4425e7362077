package dev.exactlyonce.idempotency.test;

/** The failure a {@link BusinessFunctionProbe} throws after a business function ran, as a test asked it to. */
public final class InjectedFailure extends RuntimeException {

    private static final long serialVersionUID = 1L;

    InjectedFailure(String functionName) {
        super("failure injected by the test after " + functionName + " ran");
    }
}
