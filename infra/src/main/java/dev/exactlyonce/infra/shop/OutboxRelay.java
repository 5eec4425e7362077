package dev.exactlyonce.infra.shop;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import java.io.IOException;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeoutException;
import javax.sql.DataSource;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * The order service's outbox relay: it publishes the rows not yet published, in order, to the {@code events} topic
 * exchange (routing key = event name, {@code message_id} = event id, persistent), waits for the broker's confirms,
 * then marks them published. The failure modes that make copies are switches:
 *
 * <ul>
 *   <li>{@link #crashBeforeMarking()}: the next run publishes and stops before marking, as a relay killed between the
 *       two; the next run publishes the same rows again;
 *   <li>{@link #shuffle(Random)}: the next runs publish their rows in random order, so that status changes arrive
 *       out of order;
 *   <li>{@link #replay(Instant, Instant)}: publishes again every event written in a time range, as an operator
 *       replaying a period after an incident.
 * </ul>
 */
public final class OutboxRelay {

    private static final String PENDING = """
            SELECT id, event_id, event_name, body FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT ?""";

    private static final String IN_RANGE = """
            SELECT id, event_id, event_name, body FROM outbox WHERE created_at >= ? AND created_at < ? ORDER BY id""";

    /** An outbox row. */
    private record Row(long id, String eventId, String eventName, byte[] body) {}

    /** Thrown when the relay stops, by the switch, between publishing and marking. */
    public static final class Crash extends RuntimeException {

        private static final long serialVersionUID = 1L;

        Crash(int rows) {
            super("the relay stopped after publishing " + rows + " row(s), before marking them");
        }
    }

    private final JdbcTemplate jdbc;

    private final Connection broker;

    private final String exchange;

    private volatile boolean crashBeforeMarking;

    private volatile Random shuffle;

    private int published;

    public OutboxRelay(DataSource orders, Connection broker, String exchange) {
        this.jdbc = new JdbcTemplate(orders);
        this.broker = broker;
        this.exchange = exchange;
    }

    /** The next run stops after publishing, before marking. */
    public void crashBeforeMarking() {
        this.crashBeforeMarking = true;
    }

    /** The next runs publish their rows in an order drawn from the random source. */
    public void shuffle(Random random) {
        this.shuffle = random;
    }

    /** How many messages the relay has published, copies included. */
    public synchronized int published() {
        return this.published;
    }

    /**
     * Publishes up to {@code max} pending rows and marks them published; returns how many.
     *
     * @throws Crash when the crash switch was on
     */
    public synchronized int publishPending(int max) throws IOException, TimeoutException, InterruptedException {
        List<Row> rows = this.jdbc.query(PENDING, OutboxRelay::row, max);
        if (this.shuffle != null) {
            rows = new ArrayList<>(rows);
            Collections.shuffle(rows, this.shuffle);
        }
        publish(rows);
        if (this.crashBeforeMarking) {
            this.crashBeforeMarking = false;
            throw new Crash(rows.size());
        }
        this.jdbc.update("UPDATE outbox SET published_at = now() WHERE id = ANY (?)", (Object)
                rows.stream().map(Row::id).toArray(Long[]::new));
        return rows.size();
    }

    /** Publishes every pending row, run after run, until none is left; returns how many. */
    public int publishAll() throws IOException, TimeoutException, InterruptedException {
        int total = 0;
        for (int published = publishPending(500); published > 0; published = publishPending(500)) {
            total += published;
        }
        return total;
    }

    /** Publishes again every event written in the range; returns how many. */
    public synchronized int replay(Instant from, Instant to)
            throws IOException, TimeoutException, InterruptedException {
        List<Row> rows = this.jdbc.query(IN_RANGE, OutboxRelay::row, Timestamp.from(from), Timestamp.from(to));
        publish(rows);
        return rows.size();
    }

    private void publish(List<Row> rows) throws IOException, TimeoutException, InterruptedException {
        try (Channel channel = this.broker.createChannel()) {
            channel.confirmSelect();
            for (Row row : rows) {
                AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
                        .contentType("application/json")
                        .messageId(row.eventId())
                        .deliveryMode(2)
                        .build();
                channel.basicPublish(this.exchange, row.eventName(), properties, row.body());
            }
            channel.waitForConfirmsOrDie(30_000);
            this.published += rows.size();
        }
    }

    private static Row row(ResultSet row, int index) throws SQLException {
        return new Row(row.getLong(1), row.getString(2), row.getString(3), row.getBytes(4));
    }
}
