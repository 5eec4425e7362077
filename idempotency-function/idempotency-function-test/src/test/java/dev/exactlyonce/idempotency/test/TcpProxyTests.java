package dev.exactlyonce.idempotency.test;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The proxy takes a server away for real: after a cut, no connection through it is left open. */
class TcpProxyTests {

    /** A server that accepts connections and keeps them open, saying nothing. */
    private final ServerSocket target = listen();

    private final TcpProxy proxy = TcpProxy.to("127.0.0.1", this.target.getLocalPort());

    @AfterEach
    void close() throws IOException {
        this.proxy.close();
        this.target.close();
    }

    @Test
    void aConnectionAcceptedAsTheProxyIsCutDoesNotSurviveTheCut() throws Exception {
        // The cut comes between the accept and the connection's registration, as it can on a busy machine.
        this.proxy.accepted = this.proxy::cut;

        try (Socket client = new Socket(InetAddress.getLoopbackAddress(), this.proxy.port())) {
            client.setSoTimeout(5_000);

            assertThat(closedByTheProxy(client.getInputStream()))
                    .as("the connection is closed, as the server is gone")
                    .isTrue();
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

    private static ServerSocket listen() {
        try {
            return new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        } catch (IOException ex) {
            throw new IllegalStateException(ex);
        }
    }
}
