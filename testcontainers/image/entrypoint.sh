#!/bin/sh
# Entrypoint of the zk-recipes ZooKeeper image: writes zoo.cfg from the environment and runs
# the server in the foreground, logging to stdout.
#
#   ZK_SERVER_ID              this member's id (myid); default 1
#   ZK_SERVERS                space-separated ensemble members, e.g.
#                             "server.1=zk1:2888:3888;2181 server.2=zk2:2888:3888;2181";
#                             empty means a standalone server
#   ZK_TICK_TIME              ms; default 200, so that sessions can expire in well under a second
#   ZK_MIN_SESSION_TIMEOUT    ms; default 2 x tickTime
#   ZK_MAX_SESSION_TIMEOUT    ms; default 60000
#   ZK_INIT_LIMIT             ticks; default 100
#   ZK_SYNC_LIMIT             ticks; default 25
#   ZK_CFG_EXTRA              extra zoo.cfg settings, space-separated key=value (like the
#                             official image's ZOO_CFG_EXTRA), e.g. "cnxTimeout=1000"
#   ZK_JAVA_OPTS              extra JVM options; default a small heap
set -eu

data=/var/lib/zookeeper
mkdir -p "$data"
tick=${ZK_TICK_TIME:-200}
id=${ZK_SERVER_ID:-1}
servers=${ZK_SERVERS:-}

{
    echo "tickTime=$tick"
    echo "dataDir=$data"
    echo "clientPort=2181"
    echo "initLimit=${ZK_INIT_LIMIT:-100}"
    echo "syncLimit=${ZK_SYNC_LIMIT:-25}"
    echo "minSessionTimeout=${ZK_MIN_SESSION_TIMEOUT:-$((tick * 2))}"
    echo "maxSessionTimeout=${ZK_MAX_SESSION_TIMEOUT:-60000}"
    echo "maxClientCnxns=0"
    echo "4lw.commands.whitelist=*"
    echo "admin.enableServer=false"
    echo "reconfigEnabled=false"
    echo "autopurge.purgeInterval=0"
    echo "quorumListenOnAllIPs=true"
    for kv in ${ZK_CFG_EXTRA:-}; do echo "$kv"; done
    if [ -n "$servers" ]; then
        echo "standaloneEnabled=false"
        for s in $servers; do echo "$s"; done
    fi
} > /etc/zoo.cfg
echo "$id" > "$data/myid"

echo "zk-entrypoint: server id $id; configuration:"
sed 's/^/  /' /etc/zoo.cfg

# Members find each other by container name, and names come and go: a peer's name resolves
# only once its container runs, and a member cut off by `docker network disconnect` may come
# back with another address. The JDK caches failed lookups for 10 s and successful ones for
# 30 s, which turns each of these into a stall; look names up afresh instead.
cat > /etc/zk-java.security <<'SECURITY'
networkaddress.cache.ttl=1
networkaddress.cache.negative.ttl=0
SECURITY

j=/usr/share/java
cp="$j/zookeeper.jar:$j/zookeeper-jute.jar:$j/slf4j-api.jar:$j/slf4j-simple.jar"
for x in metrics-core commons-cli commons-io snappy-java jackson-core jackson-databind \
         jackson-annotations netty-buffer netty-codec netty-common netty-handler \
         netty-resolver netty-transport netty-transport-native-epoll \
         netty-transport-native-unix-common; do
    cp="$cp:$j/$x.jar"
done

# exec: the JVM becomes PID 1's child-free replacement, so docker stop/kill reach it directly.
exec java ${ZK_JAVA_OPTS:--Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1} \
    -Djava.security.properties=/etc/zk-java.security \
    -Dorg.slf4j.simpleLogger.logFile=System.out \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dzookeeper.admin.enableServer=false \
    -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain /etc/zoo.cfg
