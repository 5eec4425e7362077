#!/usr/bin/env bash
# The main job: the three services, the payment provider and the order service on PostgreSQL (or MariaDB) and RabbitMQ
# (local, or started from infra/compose.yaml when a Docker engine is there), with every ordinary source of duplicates
# firing, and a report of what each service made of them. Builds the jars first when they are missing.
#   infra/demo.sh [--orders 200] [--database-outage 30] [--database mariadb]
set -euo pipefail
cd "$(dirname "$0")/.."
jars=(infra/target/infra-*.jar stock-service/target/stock-service-*.jar shipping-service/target/shipping-service-*.jar
    billing-service/target/billing-service-*.jar)
for jar in "${jars[@]}"; do
    if [ ! -f "$jar" ]; then
        echo "Building the jars: ./mvnw package -DskipTests (a few minutes the first time)"
        ./mvnw -q -B package -DskipTests
        break
    fi
done
exec java -jar infra/target/infra-*.jar demo "$@"
