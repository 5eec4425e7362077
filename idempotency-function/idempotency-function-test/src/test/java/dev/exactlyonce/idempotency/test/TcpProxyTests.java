package dev.exactlyonce.idempotency.test;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The proxy takes a server away for real: after a cut, no connection through it is left open. */
class TcpProxyTests {

    /** A server that accepts connections and keeps them open, saying nothing. */
    private final ServerSocket target = listen();

    private final List<Socket> accepted = new ArrayList<>();

    private final TcpProxy proxy = TcpProxy.to("127.0.0.1", this.target.getLocalPort());

    @AfterEach
    void close() throws IOException {
        this.proxy.close();
        this.target.close();
        for (Socket socket : this.accepted) {
            socket.close();
        }
    }

    @Test
    void aConnectionOpenedAsTheProxyIsCutDoesNotSurviveTheCut() throws Exception {
        CompletableFuture.runAsync(this::acceptForever);
        for (int round = 0; round < 300; round++) {
            this.proxy.restore();
            CompletableFuture<Socket> connecting = CompletableFuture.supplyAsync(this::connect);
            Thread.sleep(round % 3);
            this.proxy.cut();
            Socket client = connecting.join();
            if (client == null) {
                continue;
            }
            try (client) {
                client.setSoTimeout(2_000);
                assertThat(closedByTheProxy(client.getInputStream()))
                        .as("round %d: the connection is closed, as the server is gone", round)
                        .isTrue();
            }
        }
    }

    private static boolean closedByTheProxy(InputStream in) throws IOException {
        try {
            return in.read() < 0;
        } catch (SocketTimeoutException ex) {
            return false;
        } catch (IOException ex) {
            return true;
        }
    }

    private Socket connect() {
        try {
            return new Socket(InetAddress.getLoopbackAddress(), this.proxy.port());
        } catch (IOException ex) {
            return null;
        }
    }

    private void acceptForever() {
        while (!this.target.isClosed()) {
            try {
                Socket socket = this.target.accept();
                synchronized (this.accepted) {
                    this.accepted.add(socket);
                }
            } catch (IOException ex) {
                return;
            }
        }
    }

    private static ServerSocket listen() {
        try {
            return new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        } catch (IOException ex) {
            throw new IllegalStateException(ex);
        }
    }
}
