package dev.exactlyonce.idempotency.test;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP proxy on a local port, to take a server away from the service under test and give it back, without
 * stopping a server other tests share. {@link #cut()} closes every open connection and refuses new ones, as a
 * stopped server would; {@link #restore()} accepts connections again on the same port. {@link #freeze()} keeps every
 * connection open and accepts new ones, but forwards nothing, as a network that drops packets without closing a
 * connection would (a firewall, a failed switch, a paused virtual machine); {@link #thaw()} forwards again.
 */
public final class TcpProxy implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(TcpProxy.class);

    private final String targetHost;

    private final int targetPort;

    private final int port;

    private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();

    /** Sockets whose connection forwards nothing more, nor its close ({@link #silenceOpenConnections()}). */
    private final Set<Socket> silenced = ConcurrentHashMap.newKeySet();

    private volatile @Nullable ServerSocket server;

    /** While cut, the port bound without listening ({@link #reserve}). */
    private @Nullable Socket reservation;

    private final Object frozenLock = new Object();

    /** The connections let through since the proxy was made. */
    private final AtomicInteger connections = new AtomicInteger();

    /** Run as each connection is accepted, before it is registered: a test's way into that moment. */
    volatile Runnable accepted = () -> {};

    private boolean frozen;

    private TcpProxy(String targetHost, int targetPort) {
        this.targetHost = targetHost;
        this.targetPort = targetPort;
        this.server = listen(0);
        this.port = this.server.getLocalPort();
        accept(this.server);
    }

    /** A proxy to {@code host:port}, accepting connections on a free local port. */
    public static TcpProxy to(String host, int port) {
        return new TcpProxy(host, port);
    }

    /** The local port the service connects to. */
    public int port() {
        return this.port;
    }

    /** How many connections the proxy let through since it was made: a service that connected again made one more. */
    public int connections() {
        return this.connections.get();
    }

    /** Closes every connection through the proxy and refuses new ones. */
    public synchronized void cut() {
        if (this.server != null) {
            closeQuietly(this.server);
            this.server = null;
            this.reservation = reserve(this.port);
        }
        this.sockets.forEach(TcpProxy::closeQuietly);
        this.sockets.clear();
        logger.info("Proxy to {}:{} cut", this.targetHost, this.targetPort);
    }

    /** Accepts connections again, on the same port. */
    public synchronized void restore() {
        if (this.server == null) {
            closeQuietly(this.reservation);
            this.reservation = null;
            this.server = listen(this.port);
            accept(this.server);
            logger.info("Proxy to {}:{} restored", this.targetHost, this.targetPort);
        }
    }

    /** Keeps every connection open, and accepts new ones, but forwards nothing until {@link #thaw()}. */
    public void freeze() {
        synchronized (this.frozenLock) {
            this.frozen = true;
        }
        logger.info("Proxy to {}:{} frozen", this.targetHost, this.targetPort);
    }

    /**
     * The connections open now forward nothing more, nor their closes, until the proxy closes: as when a firewall or a
     * NAT between the two forgets them (a failover, its table flushed), and a peer's close is lost with the rest. The
     * other end of a connection closed meanwhile is left open, waiting. New connections go through.
     */
    public void silenceOpenConnections() {
        this.silenced.addAll(this.sockets);
        logger.info(
                "Proxy to {}:{}: its {} open sockets silenced", this.targetHost, this.targetPort, this.silenced.size());
    }

    /** Forwards again what waited, and what comes next. */
    public void thaw() {
        synchronized (this.frozenLock) {
            this.frozen = false;
            this.frozenLock.notifyAll();
        }
        logger.info("Proxy to {}:{} thawed", this.targetHost, this.targetPort);
    }

    @Override
    public void close() {
        thaw();
        cut();
        synchronized (this) {
            closeQuietly(this.reservation);
            this.reservation = null;
        }
    }

    /**
     * Binds the port without listening, so that no other socket of the machine (another test JVM's, say) takes it
     * while the proxy is cut: a connection to it is refused, as to a stopped server. {@code null} when the port cannot
     * be bound within 200 ms (the listener's close still under way): the port is then free meanwhile.
     */
    private static @Nullable Socket reserve(int port) {
        long deadline = System.nanoTime() + Duration.ofMillis(200).toNanos();
        while (true) {
            Socket socket = new Socket();
            try {
                socket.setReuseAddress(true);
                socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
                return socket;
            } catch (IOException ex) {
                closeQuietly(socket);
                if (!(ex instanceof BindException) || System.nanoTime() > deadline) {
                    return null;
                }
                LockSupport.parkNanos(Duration.ofMillis(10).toNanos());
            }
        }
    }

    /**
     * Listens on the port; on the port of a listener just closed, tries again for up to a second (the closing of a
     * listener whose thread is blocked in accept completes when that thread lets go).
     */
    private static ServerSocket listen(int port) {
        long deadline = System.nanoTime() + Duration.ofSeconds(1).toNanos();
        while (true) {
            try {
                ServerSocket server = new ServerSocket();
                server.setReuseAddress(true);
                try {
                    server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
                } catch (IOException ex) {
                    server.close();
                    throw ex;
                }
                return server;
            } catch (BindException ex) {
                if (port == 0 || System.nanoTime() > deadline) {
                    throw new UncheckedIOException("Could not listen on port " + port, ex);
                }
                LockSupport.parkNanos(Duration.ofMillis(10).toNanos());
            } catch (IOException ex) {
                throw new UncheckedIOException("Could not listen on port " + port, ex);
            }
        }
    }

    private void accept(ServerSocket server) {
        Thread acceptor = new Thread(
                () -> {
                    while (!server.isClosed()) {
                        try {
                            Socket client = server.accept();
                            this.accepted.run();
                            Socket upstream;
                            try {
                                // Bounded: a target cut off drops the connection's first packet, and the
                                // connections after this one wait behind it.
                                upstream = new Socket();
                                upstream.connect(new InetSocketAddress(this.targetHost, this.targetPort), 10_000);
                            } catch (IOException ex) {
                                closeQuietly(client);
                                throw ex;
                            }
                            if (!register(server, client, upstream)) {
                                continue;
                            }
                            pump(client, upstream);
                            pump(upstream, client);
                        } catch (IOException ex) {
                            logger.debug("Proxy stopped accepting: {}", ex.getMessage());
                        }
                    }
                },
                "tcp-proxy-" + server.getLocalPort());
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /**
     * Registers a connection, unless the proxy was cut since it was accepted: then it is closed, as a connection to a
     * stopped server would be (a cut between accept and registration let it live on).
     */
    private synchronized boolean register(ServerSocket acceptedBy, Socket client, Socket upstream) {
        if (this.server != acceptedBy) {
            closeQuietly(client);
            closeQuietly(upstream);
            return false;
        }
        this.sockets.add(client);
        this.sockets.add(upstream);
        this.connections.incrementAndGet();
        return true;
    }

    private void pump(Socket from, Socket to) {
        Thread pump = new Thread(
                () -> {
                    try (InputStream in = from.getInputStream();
                            OutputStream out = to.getOutputStream()) {
                        byte[] buffer = new byte[8192];
                        for (int read = in.read(buffer); read >= 0; read = in.read(buffer)) {
                            awaitThawed();
                            if (this.silenced.contains(from)) {
                                awaitClosed(to);
                            }
                            out.write(buffer, 0, read);
                            out.flush();
                        }
                    } catch (IOException ex) {
                        logger.trace("Proxy connection closed: {}", ex.getMessage());
                    } finally {
                        if (this.silenced.contains(from)) {
                            // Its close is lost: the other end stays open, until the proxy closes.
                            awaitClosed(to);
                        }
                        closeQuietly(from);
                        closeQuietly(to);
                        this.sockets.remove(from);
                        this.sockets.remove(to);
                        this.silenced.remove(from);
                        this.silenced.remove(to);
                    }
                },
                "tcp-proxy-pump");
        pump.setDaemon(true);
        pump.start();
    }

    /** Waits until the socket is closed (by {@link #cut()}, or its own end): a silenced connection's pump. */
    private static void awaitClosed(Socket socket) {
        while (!socket.isClosed()) {
            LockSupport.parkNanos(Duration.ofMillis(100).toNanos());
        }
    }

    /** Holds what was read while the proxy is frozen; a cut closes the sockets, which ends the pump after. */
    private void awaitThawed() throws IOException {
        synchronized (this.frozenLock) {
            while (this.frozen) {
                try {
                    this.frozenLock.wait();
                } catch (InterruptedException ex) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while frozen", ex);
                }
            }
        }
    }

    private static void closeQuietly(@Nullable AutoCloseable closeable) {
        if (closeable != null) {
            try {
                closeable.close();
            } catch (Exception ex) {
                logger.trace("Closing {}: {}", closeable, ex.getMessage());
            }
        }
    }
}
