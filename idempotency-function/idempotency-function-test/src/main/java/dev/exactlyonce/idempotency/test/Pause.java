package dev.exactlyonce.idempotency.test;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Holds one invocation of a business function after it ran and before its transaction ends, until the test
 * releases it (see {@link BusinessFunctionProbe#pauseNext(String)}).
 */
public final class Pause {

    private static final Duration LIMIT = Duration.ofSeconds(30);

    private final String functionName;

    private final CountDownLatch reached = new CountDownLatch(1);

    private final CountDownLatch released = new CountDownLatch(1);

    private volatile boolean fail;

    Pause(String functionName) {
        this.functionName = functionName;
    }

    /** Waits until the function ran and is held; fails the test after 30 seconds. */
    public void awaitReached() {
        await(this.reached, "reach the pause");
    }

    /** Lets the invocation go on: its transaction commits. */
    public void release() {
        this.released.countDown();
    }

    /** Lets the invocation go on with an {@link InjectedFailure}: its transaction rolls back. */
    public void releaseWithFailure() {
        this.fail = true;
        this.released.countDown();
    }

    /** Called on the consumer thread; returns whether the invocation must now fail. */
    boolean hold() {
        this.reached.countDown();
        await(this.released, "be released");
        return this.fail;
    }

    private void await(CountDownLatch latch, String what) {
        try {
            if (!latch.await(LIMIT.toSeconds(), TimeUnit.SECONDS)) {
                throw new IllegalStateException(this.functionName + " did not " + what + " within " + LIMIT);
            }
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while waiting for " + this.functionName + " to " + what, ex);
        }
    }
}
