#!/usr/bin/env bash
# TLS on this machine's PostgreSQL and on the RabbitMQ 4 node of infra/rabbitmq4.sh, for the tests that connect with
# TLS on (*OverTlsIT; without it they are skipped) and for trying a service's TLS settings before a deployment: a
# certificate authority made once, and a certificate it signs for 127.0.0.1 and localhost, which both servers present.
# Needs root (the servers' files).
#
#   infra/tls.sh up    makes the certificates when missing; turns TLS on in PostgreSQL (a reload: its plain
#                      connections keep working) and on a listener of its own of the RabbitMQ 4 node (the node is
#                      restarted when it runs without it)
#   infra/tls.sh env   the variables that point the tests at them: TLS_CA_FILE, RABBITMQ_TLS_PORT
#
# Settings: TLS_DIR (default /var/lib/exactlyonce/tls); RABBITMQ4_ROOT and RABBITMQ4_PORT as infra/rabbitmq4.sh (the
# TLS listener is on the port above RABBITMQ4_PORT, 5674 by default).
set -euo pipefail

dir=${TLS_DIR:-/var/lib/exactlyonce/tls}
root=${RABBITMQ4_ROOT:-/var/lib/exactlyonce/trixie}
tls_port=$((${RABBITMQ4_PORT:-5673} + 1))
here=$(cd "$(dirname "$0")" && pwd)

say() {
    echo "tls: $*" >&2
}

certificates() {
    if [ -f "$dir/server.pem" ]; then
        return
    fi
    say "making a certificate authority and a certificate for 127.0.0.1 and localhost in $dir"
    mkdir -p "$dir"
    # The keys are readable by root alone from their first byte.
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=exactly-once test authority" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" \
        2>/dev/null
    printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth\n' >"$dir/server.ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
        -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
    chmod 644 "$dir/ca.pem" "$dir/server.pem"
    umask 022
}

# PostgreSQL reads its key as the postgres user, and refuses one others may read.
postgresql() {
    mkdir -p "$dir/postgresql"
    cp "$dir/server.pem" "$dir/server.key" "$dir/postgresql/"
    chown -R postgres:postgres "$dir/postgresql"
    chmod 600 "$dir/postgresql/server.key"
    psql -h 127.0.0.1 -U postgres -qAt \
        -c "ALTER SYSTEM SET ssl_cert_file = '$dir/postgresql/server.pem'" \
        -c "ALTER SYSTEM SET ssl_key_file = '$dir/postgresql/server.key'" \
        -c "ALTER SYSTEM SET ssl = on" \
        -c "SELECT pg_reload_conf()" >/dev/null
    # The reload is asynchronous: wait until a connection with TLS required is taken.
    for _ in $(seq 1 20); do
        psql "host=127.0.0.1 user=postgres sslmode=verify-full sslrootcert=$dir/ca.pem" -qAtc 'SELECT 1' \
            >/dev/null 2>&1 && return
        sleep 0.5
    done
    say "PostgreSQL takes no TLS connection on 127.0.0.1 after its reload; its log: /var/log/postgresql/"
    exit 1
}

# The node reads its files from its Debian 13 root, as the rabbitmq user; infra/rabbitmq4.sh adds the listener when
# they are there.
rabbitmq() {
    mkdir -p "$root/etc/rabbitmq/tls"
    cp "$dir/ca.pem" "$dir/server.pem" "$dir/server.key" "$root/etc/rabbitmq/tls/"
    chroot "$root" chown -R rabbitmq:rabbitmq /etc/rabbitmq/tls
    chmod 600 "$root/etc/rabbitmq/tls/server.key"
    local status
    if status=$("$here/rabbitmq4.sh" ctl -q status 2>/dev/null) && [[ $status != *"port: $tls_port,"* ]]; then
        say "restarting the RabbitMQ 4 node, which runs without its TLS listener"
        "$here/rabbitmq4.sh" stop
    fi
    "$here/rabbitmq4.sh" start
    status=$("$here/rabbitmq4.sh" ctl -q status 2>/dev/null) || true
    if [[ $status != *"port: $tls_port,"* ]]; then
        say "the RabbitMQ 4 node has no TLS listener on $tls_port; its logs: $root/var/log/rabbitmq/"
        exit 1
    fi
}

case "${1:-}" in
up)
    certificates
    postgresql
    rabbitmq
    say "PostgreSQL on 127.0.0.1:5432 and RabbitMQ on 127.0.0.1:$tls_port take TLS; authority: $dir/ca.pem"
    ;;
env)
    echo "export TLS_CA_FILE=$dir/ca.pem RABBITMQ_TLS_PORT=$tls_port"
    ;;
*)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
