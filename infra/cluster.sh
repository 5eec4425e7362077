#!/usr/bin/env bash
# A three-node RabbitMQ 4 cluster, or a three-broker Kafka, on one machine, each node in a network namespace of its own
# (an address of its own on a bridge), so that a node can be killed, frozen or cut off from the others and from the
# services, then healed. Needs root (ip netns, chroot).
#
#   infra/cluster.sh ENGINE up             makes the namespaces and starts the three nodes as one cluster
#   infra/cluster.sh ENGINE down           stops the nodes and removes their namespaces (and their data)
#   infra/cluster.sh ENGINE kill NODE      kill -9 of the node's processes (NODE is 1, 2 or 3)
#   infra/cluster.sh ENGINE start NODE     starts a node again, after kill, into the cluster
#   infra/cluster.sh ENGINE restart NODE   a rolling restart's step: once the others keep a majority of every quorum
#                                          queue (RabbitMQ), stops the node cleanly and starts it again
#   infra/cluster.sh ENGINE freeze NODE    SIGSTOP of the node's processes: it neither answers nor closes anything
#   infra/cluster.sh ENGINE cut NODE       takes the node's link down: cut off from the other nodes and the services
#   infra/cluster.sh ENGINE heal           every link of the engine's nodes up, every frozen node resumed
#   infra/cluster.sh ENGINE addresses      the nodes' addresses (spring.rabbitmq.addresses, Kafka's bootstrap list)
#   infra/cluster.sh rabbitmq ctl NODE ARGS  rabbitmqctl on the node
#
# ENGINE is rabbitmq or kafka.
#
# rabbitmq: RabbitMQ 4 from the Debian 13 root of infra/rabbitmq4.sh, at 10.77.0.11 to 10.77.0.13, port 5672, user
# guest. The cluster pauses a minority: a node cut off from the other two stops serving its clients, so that they
# reconnect to the majority (where the quorum queues keep their leaders), until it sees the other two again and
# rejoins them. The nodes notice a silent peer within 15 to 25 s (net_ticktime 20; 45 to 75 s by default).
#
# kafka: three brokers in KRaft mode, each also a controller, at 10.77.0.21 to 10.77.0.23, port 9092, with
# replication 3 and min.insync.replicas 2 for every topic they create; Kafka's classes are those of the library's test
# class path (Maven resolves it at the first up).
set -euo pipefail

engine=${1:-}
command=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=${RABBITMQ4_ROOT:-/var/lib/exactlyonce/trixie}
kafka_data=${KAFKA_CLUSTER_DATA:-/var/lib/exactlyonce/kafka}
bridge=eo-br0
prefix=10.77.0
nodes=(1 2 3)

say() {
    echo "cluster: $*" >&2
}

usage() {
    sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

case "$engine" in
rabbitmq) short=rmq digit=1 ;;
kafka) short=kafka digit=2 ;;
*) usage ;;
esac

ns() {
    echo "eo-$short$1"
}

link() {
    echo "eo-$short$1-h"
}

address() {
    echo "$prefix.$digit$1"
}

check_node() {
    case "${1:-}" in
    1 | 2 | 3) ;;
    *)
        say "a node is 1, 2 or 3, not '${1:-}'"
        exit 2
        ;;
    esac
}

# The node's processes, found by the namespace they run in.
pids() {
    ip netns pids "$(ns "$1")" 2>/dev/null || true
}

network() {
    if ! ip link show "$bridge" >/dev/null 2>&1; then
        ip link add "$bridge" type bridge
        ip addr add "$prefix.1/24" dev "$bridge"
    fi
    ip link set "$bridge" up
    for n in "${nodes[@]}"; do
        if ! ip netns list | grep -qw "$(ns "$n")"; then
            ip netns add "$(ns "$n")"
            ip link add "$(link "$n")" type veth peer name eth0 netns "$(ns "$n")"
            ip link set "$(link "$n")" master "$bridge" up
            ip netns exec "$(ns "$n")" ip addr add "$(address "$n")/24" dev eth0
            ip netns exec "$(ns "$n")" ip link set eth0 up
            ip netns exec "$(ns "$n")" ip link set lo up
            ip netns exec "$(ns "$n")" ip route add default via "$prefix.1"
        fi
    done
}

remove_network() {
    for n in "${nodes[@]}"; do
        ip netns del "$(ns "$n")" 2>/dev/null || true
    done
    # The bridge goes with the last engine's namespaces.
    if ! ip netns list | grep -q '^eo-'; then
        ip link del "$bridge" 2>/dev/null || true
    fi
}

# --- RabbitMQ -------------------------------------------------------------------------------------------------------

rabbit_in_node() {
    local node=$1
    shift
    ip netns exec "$(ns "$node")" chroot "$root" env RABBITMQ_CONF_ENV_FILE="/etc/rabbitmq/cluster/rmq$node-env.conf" "$@"
}

rabbit_ctl() {
    local node=$1
    shift
    rabbit_in_node "$node" rabbitmqctl "$@"
}

rabbit_configure() {
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    mkdir -p "$root/etc/rabbitmq/cluster"
    for n in "${nodes[@]}"; do
        grep -q " rmq$n\$" "$root/etc/hosts" || echo "$(address "$n") rmq$n" >>"$root/etc/hosts"
        cat >"$root/etc/rabbitmq/cluster/rmq$n-env.conf" <<EOF
NODENAME=rabbit@rmq$n
MNESIA_BASE=/var/lib/rabbitmq/cluster/rmq$n
LOG_BASE=/var/log/rabbitmq/cluster/rmq$n
CONFIG_FILE=/etc/rabbitmq/cluster/rabbitmq.conf
ENABLED_PLUGINS_FILE=/etc/rabbitmq/cluster/enabled_plugins
EOF
        mkdir -p "$root/var/lib/rabbitmq/cluster/rmq$n" "$root/var/log/rabbitmq/cluster/rmq$n"
    done
    # No plugin: the single node's management API (infra/rabbitmq4.sh) is not theirs to start.
    echo "[]." >"$root/etc/rabbitmq/cluster/enabled_plugins"
    chroot "$root" chown -R rabbitmq:rabbitmq /var/lib/rabbitmq/cluster /var/log/rabbitmq/cluster
    cat >"$root/etc/rabbitmq/cluster/rabbitmq.conf" <<EOF
loopback_users = none
cluster_formation.peer_discovery_backend = classic_config
cluster_formation.classic_config.nodes.1 = rabbit@rmq1
cluster_formation.classic_config.nodes.2 = rabbit@rmq2
cluster_formation.classic_config.nodes.3 = rabbit@rmq3
cluster_partition_handling = pause_minority
net_ticktime = 20
EOF
    # The nodes share an Erlang cookie: the rabbitmq user's of the root.
    chroot "$root" sh -c 'test -s /var/lib/rabbitmq/.erlang.cookie || {
        head -c 30 /dev/urandom | od -An -tx1 | tr -d " \n" > /var/lib/rabbitmq/.erlang.cookie
        chown rabbitmq:rabbitmq /var/lib/rabbitmq/.erlang.cookie; chmod 400 /var/lib/rabbitmq/.erlang.cookie; }'
}

rabbit_start() {
    rabbit_ctl "$1" -q status >/dev/null 2>&1 || rabbit_in_node "$1" rabbitmq-server -detached
}

rabbit_await() {
    for _ in $(seq 1 180); do
        rabbit_ctl "$1" -q --timeout 180 await_startup >/dev/null 2>&1 && return 0
        sleep 1
    done
    say "node $1 did not start; its logs: $root/var/log/rabbitmq/cluster/rmq$1/"
    exit 1
}

# --- Kafka ----------------------------------------------------------------------------------------------------------

# Kafka's classes: the library's test class path (spring-kafka-test brings Kafka's broker), resolved by Maven once per
# cluster, so that the cluster starts before anything of the project is built.
kafka_classpath() {
    if [ ! -s "$kafka_data/classpath" ]; then
        mkdir -p "$kafka_data"
        "$here/../mvnw" -q -f "$here/../idempotency-function/pom.xml" \
            org.apache.maven.plugins:maven-dependency-plugin:3.9.0:build-classpath \
            -Dmdep.includeScope=test -Dmdep.outputFile="$kafka_data/classpath" >"$kafka_data/classpath.log" 2>&1 || {
            say "resolving Kafka's classes failed: $kafka_data/classpath.log"
            exit 1
        }
        cat >"$kafka_data/logback.xml" <<EOF
<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d %-5level [%thread] %logger{36} %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="out"/></root>
</configuration>
EOF
    fi
    cat "$kafka_data/classpath"
}

# Runs a main class of Kafka's in the node's namespace.
kafka_java() {
    local node=$1 main=$2 classpath
    shift 2
    classpath=$(kafka_classpath)
    ip netns exec "$(ns "$node")" java -Xmx512m -cp "$classpath" \
        -Dlogback.configurationFile="$kafka_data/logback.xml" "$main" "$@"
}

kafka_configure() {
    local voters="1@$(address 1):9093,2@$(address 2):9093,3@$(address 3):9093" cluster_id
    for n in "${nodes[@]}"; do
        mkdir -p "$kafka_data/k$n"
        cat >"$kafka_data/k$n.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://$(address "$n"):9092,CONTROLLER://$(address "$n"):9093
advertised.listeners=PLAINTEXT://$(address "$n"):9092
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$kafka_data/k$n/data
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
EOF
    done
    if [ ! -f "$kafka_data/cluster-id" ]; then
        head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' >"$kafka_data/cluster-id"
    fi
    cluster_id=$(cat "$kafka_data/cluster-id")
    for n in "${nodes[@]}"; do
        if [ ! -f "$kafka_data/k$n/data/meta.properties" ]; then
            kafka_java "$n" kafka.tools.StorageTool format -t "$cluster_id" -c "$kafka_data/k$n.properties" \
                >"$kafka_data/k$n/format.log" 2>&1 || {
                say "formatting broker $n's storage failed: $kafka_data/k$n/format.log"
                exit 1
            }
        fi
    done
}

kafka_answers() {
    (exec 3<>"/dev/tcp/$(address "$1")/9092") 2>/dev/null
}

kafka_start() {
    if [ -n "$(pids "$1")" ]; then
        return
    fi
    kafka_java "$1" kafka.Kafka "$kafka_data/k$1.properties" >"$kafka_data/k$1/broker.log" 2>&1 &
}

kafka_await() {
    for _ in $(seq 1 120); do
        kafka_answers "$1" && return 0
        sleep 1
    done
    say "broker $1 did not start; its log: $kafka_data/k$1/broker.log"
    exit 1
}

# --- Commands -------------------------------------------------------------------------------------------------------

addresses() {
    local port list=""
    port=$([ "$engine" = rabbitmq ] && echo 5672 || echo 9092)
    for n in "${nodes[@]}"; do list="$list${list:+,}$(address "$n"):$port"; done
    echo "$list"
}

start_node() {
    if [ "$engine" = rabbitmq ]; then
        rabbit_start "$1"
        rabbit_await "$1"
    else
        kafka_start "$1"
        kafka_await "$1"
    fi
}

case "$command" in
up)
    network
    if [ "$engine" = rabbitmq ]; then
        "$here/rabbitmq4.sh" install
        rabbit_configure
        for n in "${nodes[@]}"; do rabbit_start "$n"; done
        for n in "${nodes[@]}"; do rabbit_await "$n"; done
        say "RabbitMQ $(rabbit_ctl 1 -q version) on three nodes: $(addresses)"
    else
        kafka_classpath >/dev/null
        kafka_configure
        for n in "${nodes[@]}"; do kafka_start "$n"; done
        for n in "${nodes[@]}"; do kafka_await "$n"; done
        say "Kafka on three brokers: $(addresses)"
    fi
    ;;
down)
    for n in "${nodes[@]}"; do
        for pid in $(pids "$n"); do kill -9 "$pid" 2>/dev/null || true; done
    done
    remove_network
    if [ "$engine" = rabbitmq ]; then
        rm -rf "$root/var/lib/rabbitmq/cluster"
    else
        rm -rf "$kafka_data"
    fi
    ;;
kill)
    check_node "${3:-}"
    for pid in $(pids "$3"); do kill -9 "$pid" 2>/dev/null || true; done
    ;;
start)
    check_node "${3:-}"
    start_node "$3"
    ;;
restart)
    check_node "${3:-}"
    if [ "$engine" = rabbitmq ]; then
        rabbit_in_node "$3" rabbitmq-upgrade -q await_online_quorum_plus_one --timeout 300 >/dev/null
        rabbit_ctl "$3" -q stop
    else
        for pid in $(pids "$3"); do kill -TERM "$pid" 2>/dev/null || true; done
        for _ in $(seq 1 60); do
            [ -z "$(pids "$3")" ] && break
            sleep 1
        done
    fi
    start_node "$3"
    ;;
freeze)
    check_node "${3:-}"
    for pid in $(pids "$3"); do kill -STOP "$pid"; done
    ;;
cut)
    check_node "${3:-}"
    ip link set "$(link "$3")" down
    ;;
heal)
    for n in "${nodes[@]}"; do
        ip link set "$(link "$n")" up 2>/dev/null || true
        for pid in $(pids "$n"); do kill -CONT "$pid" 2>/dev/null || true; done
    done
    ;;
ctl)
    [ "$engine" = rabbitmq ] || usage
    check_node "${3:-}"
    node=$3
    shift 3
    rabbit_ctl "$node" "$@"
    ;;
addresses)
    addresses
    ;;
*)
    usage
    ;;
esac
