package dev.exactlyonce.idempotency.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatExceptionOfType;

import java.io.IOException;
import java.io.InputStream;
import java.net.BindException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
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

    @Test
    void whileCutItsPortRefusesConnectionsAndStaysItsOwn() throws Exception {
        this.proxy.cut();

        assertThatExceptionOfType(ConnectException.class)
                .as("a connection is refused, as by a stopped server")
                .isThrownBy(() -> new Socket(InetAddress.getLoopbackAddress(), this.proxy.port()).close());
        try (Socket other = new Socket()) {
            assertThatExceptionOfType(BindException.class)
                    .as("no other socket of the machine (another test JVM's) takes the port meanwhile")
                    .isThrownBy(() ->
                            other.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), this.proxy.port())));
        }

        this.proxy.restore();
        try (Socket client = new Socket(InetAddress.getLoopbackAddress(), this.proxy.port())) {
            assertThat(client.isConnected()).as("restored, on the same port").isTrue();
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
