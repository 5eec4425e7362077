#!/bin/sh
# Records where bench-pipeline's consumer threads spend their CPU and what they allocate, with Java Flight Recorder:
# the JDK's "profile" settings, with Java methods sampled every millisecond (not 10 ms) and each thread's allocation
# read every second. Usage, from the repository's root once the infra jar is built:
#   infra/profiling/profile.sh guard.jfr --scenarios guard,duplicates,batch --rounds 1 --messages 30000 --seconds 3
# then infra/profiling/frames.py and infra/profiling/allocated.py read it (docs/performance.md).
set -e
recording=$1
shift
settings=$(mktemp --suffix=.jfc)
sed -e '/"jdk.ExecutionSample"/,/<\/event>/s/10 ms/1 ms/' \
    -e '/"jdk.ThreadAllocationStatistics"/,/<\/event>/s/everyChunk/1 s/' \
    "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")/lib/jfr/profile.jfc" > "$settings"
java -XX:StartFlightRecording=filename="$recording",settings="$settings" \
    -jar "$(ls infra/target/infra-*.jar | head -1)" bench-pipeline "$@"
rm -f "$settings"
