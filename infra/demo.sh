#!/usr/bin/env bash
# The main job: the three services, the payment provider and the order service on PostgreSQL (or MariaDB) and RabbitMQ
# (local, or started from infra/compose.yaml when a Docker engine is there), with every ordinary source of duplicates
# firing, and a report of what each service made of them. Builds the jars first when they are missing.
#   infra/demo.sh [--orders 200] [--database-outage 30] [--provider-freeze 600] [--database mariadb]
#                 [--binder kafka] [--cluster] [--console]
# --binder kafka runs the services with their kafka profile (on the brokers KAFKA_BROKERS names, or on one the demo
# starts in its own process). --cluster runs the shop on a three-node cluster of that broker (infra/cluster.sh rabbitmq
# up, or kafka up, as root), kills one node and cuts another off mid-run. --console (RabbitMQ only) leaves the shop
# running after the report, with the operator console (infra/console) watching it, and prints its address and a
# password of the run; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
binder=rabbitmq
previous=
for arg in "$@"; do
    if [ "$previous" = "--binder" ]; then
        binder=$arg
    fi
    previous=$arg
done
args=()
for arg in "$@"; do
    if [ "$arg" = "--cluster" ]; then
        if [ "$binder" = kafka ]; then
            infra/cluster.sh kafka up
            KAFKA_CLUSTER=$(infra/cluster.sh kafka addresses)
            export KAFKA_CLUSTER KAFKA_CLUSTER_CONTROL="$PWD/infra/cluster.sh kafka"
        else
            infra/cluster.sh rabbitmq up
            RABBITMQ_CLUSTER=$(infra/cluster.sh rabbitmq addresses)
            export RABBITMQ_CLUSTER RABBITMQ_CLUSTER_CONTROL="$PWD/infra/cluster.sh rabbitmq"
            # The broker users are the cluster's: created through a node of it.
            export RABBITMQCTL="$PWD/infra/cluster.sh rabbitmq ctl 1"
        fi
        args+=(--cluster "$binder")
    elif [ "$arg" = "--console" ]; then
        args+=(--console true)
    else
        args+=("$arg")
    fi
done
jars=(infra/target/infra-*.jar stock-service/target/stock-service-*.jar shipping-service/target/shipping-service-*.jar
    billing-service/target/billing-service-*.jar infra/console/target/console-*.jar)
for jar in "${jars[@]}"; do
    if [ ! -f "$jar" ]; then
        echo "Building the jars: ./mvnw package -DskipTests (a few minutes the first time)"
        ./mvnw -q -B package -DskipTests
        break
    fi
done
exec java -jar infra/target/infra-*.jar demo ${args[@]+"${args[@]}"}
