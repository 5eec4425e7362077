package dev.exactlyonce.idempotency.outbox;

import jakarta.persistence.EntityManager;
import org.springframework.orm.jpa.EntityManagerHolder;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.util.ClassUtils;

/**
 * Flushes the JPA persistence contexts bound to the transaction under way, where the service uses JPA: what an ORM
 * would write at the commit is written before the outbox locks its keys, so that it never waits for a row lock while
 * holding them.
 */
final class PersistenceContexts {

    private static final boolean JPA = ClassUtils.isPresent(
                    "org.springframework.orm.jpa.EntityManagerHolder", PersistenceContexts.class.getClassLoader())
            && ClassUtils.isPresent("jakarta.persistence.EntityManager", PersistenceContexts.class.getClassLoader());

    private PersistenceContexts() {}

    static void flush() {
        if (JPA) {
            Jpa.flush();
        }
    }

    /** Loaded only where JPA is on the class path. */
    private static final class Jpa {

        static void flush() {
            for (Object resource :
                    TransactionSynchronizationManager.getResourceMap().values()) {
                if (resource instanceof EntityManagerHolder holder) {
                    EntityManager entityManager = holder.getEntityManager();
                    if (entityManager.isOpen() && entityManager.isJoinedToTransaction()) {
                        entityManager.flush();
                    }
                }
            }
        }
    }
}
