#!/usr/bin/env bash
# RabbitMQ 4 for machines without Docker (with Docker, Testcontainers and infra/compose.yaml pull rabbitmq:4): a
# Debian 13 (trixie) root made once with debootstrap, holding Debian's rabbitmq-server 4 and Erlang 27, and a node run
# from it on ports of its own, beside any other broker of the machine. Needs root (debootstrap, chroot).
#
#   infra/rabbitmq4.sh install   builds the root when missing (a few minutes, once)
#   infra/rabbitmq4.sh start     builds the root when missing, starts the node, waits for it
#   infra/rabbitmq4.sh stop      stops the node
#   infra/rabbitmq4.sh ctl ARGS  rabbitmqctl on the node (what the tests' RABBITMQCTL names)
#   infra/rabbitmq4.sh env       the variables that point the tests and the demo at the node
#
# Settings: RABBITMQ4_ROOT (default /var/lib/exactlyonce/trixie), RABBITMQ4_PORT (AMQP, default 5673; the node's
# distribution port is 20000 above it, its management API 10000 above it, its epmd listens on 4370).
set -euo pipefail

root=${RABBITMQ4_ROOT:-/var/lib/exactlyonce/trixie}
port=${RABBITMQ4_PORT:-5673}
management_port=$((port + 10000))
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

say() {
    echo "rabbitmq4: $*" >&2
}

install_root() {
    if [ -x "$root/usr/sbin/rabbitmq-server" ]; then
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        say "making the Debian 13 root needs root (debootstrap, chroot); run this script as root once"
        exit 1
    fi
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap (Debian's package)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
    fi
    if [ ! -x "$root/usr/bin/apt-get" ]; then
        say "making a Debian 13 (trixie) root in $root from $mirror (a few minutes, once)"
        mkdir -p "$root"
        debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
            say "debootstrap failed; its log: $root.debootstrap.log"
            exit 1
        }
    fi
    # Packages installed in the root start no service: the node is started by this script.
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod +x "$root/usr/sbin/policy-rc.d"
    say "installing rabbitmq-server in the root"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server \
        >"$root.rabbitmq-server.log" 2>&1 || {
        say "apt-get install rabbitmq-server failed in the root; its log: $root.rabbitmq-server.log"
        exit 1
    }
}

# A node looks this machine's name up for connections: from the root's hosts file, not a DNS server (a connection's
# handshake would otherwise wait for the resolver's timeout, 5 s, whenever it is slow to answer).
name_this_machine() {
    grep -qw "$(hostname)" "$root/etc/hosts" || echo "127.0.0.1 $(hostname)" >>"$root/etc/hosts"
}

configure() {
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    name_this_machine
    mkdir -p "$root/etc/rabbitmq"
    cat >"$root/etc/rabbitmq/rabbitmq-env.conf" <<EOF
NODENAME=rabbit4@localhost
NODE_PORT=$port
export ERL_EPMD_PORT=4370
EOF
    cat >"$root/etc/rabbitmq/rabbitmq.conf" <<EOF
listeners.tcp.default = $port
loopback_users = none
management.tcp.ip = 127.0.0.1
management.tcp.port = $management_port
EOF
    # TLS on a listener of its own, one port above, once infra/tls.sh has put the certificates in the root.
    if [ -f "$root/etc/rabbitmq/tls/server.pem" ]; then
        cat >>"$root/etc/rabbitmq/rabbitmq.conf" <<EOF
listeners.ssl.default = $((port + 1))
ssl_options.cacertfile = /etc/rabbitmq/tls/ca.pem
ssl_options.certfile = /etc/rabbitmq/tls/server.pem
ssl_options.keyfile = /etc/rabbitmq/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
EOF
    fi
    # The management API: the demo and the tests create broker users through it, one HTTP call each, where
    # rabbitmqctl takes seconds a call. The cluster's nodes (infra/cluster.sh) read a plugins file of their own.
    echo "[rabbitmq_management]." >"$root/etc/rabbitmq/enabled_plugins"
}

ctl() {
    chroot "$root" rabbitmqctl "$@"
}

case "${1:-}" in
install)
    install_root
    name_this_machine
    ;;
start)
    install_root
    configure
    if ctl -q status >/dev/null 2>&1; then
        say "the node already runs on 127.0.0.1:$port"
        exit 0
    fi
    chroot "$root" rabbitmq-server -detached
    # await_startup fails at once while the node has not yet registered with epmd.
    for _ in $(seq 1 120); do
        ctl -q --timeout 120 await_startup >/dev/null 2>&1 && break
        sleep 1
    done
    ctl -q status >/dev/null 2>&1 || {
        say "the node did not start; its logs: $root/var/log/rabbitmq/"
        exit 1
    }
    say "RabbitMQ $(ctl -q version) answers on 127.0.0.1:$port"
    ;;
stop)
    # shutdown returns once the node's runtime has exited, so that a start right after starts a new node.
    ctl -q shutdown >/dev/null 2>&1 || say "the node was not running"
    ;;
ctl)
    shift
    ctl "$@"
    ;;
env)
    echo "export RABBITMQ_HOST=127.0.0.1 RABBITMQ_PORT=$port RABBITMQ_MANAGEMENT_PORT=$management_port RABBITMQCTL=\"$self ctl\""
    ;;
*)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
