#!/bin/sh
# Entrypoint of the zk-recipes ZooKeeper image. It speaks the official `zookeeper` image's
# interface, so that the harness drives either image the same way:
#
#   ZOO_MY_ID                   this member's id (myid); default 1
#   ZOO_SERVERS                 space-separated members, e.g.
#                               "server.1=zk1:2888:3888;2181 server.2=zk2:2888:3888;2181";
#                               empty means a standalone server
#   ZOO_TICK_TIME               ms; default 2000
#   ZOO_INIT_LIMIT              ticks; default 5
#   ZOO_SYNC_LIMIT              ticks; default 2
#   ZOO_MAX_CLIENT_CNXNS        default 60
#   ZOO_STANDALONE_ENABLED      default true
#   ZOO_ADMINSERVER_ENABLED     default false (this image ships no admin server)
#   ZOO_AUTOPURGE_PURGEINTERVAL hours; default 0
#   ZOO_AUTOPURGE_SNAPRETAINCOUNT default 3
#   ZOO_4LW_COMMANDS_WHITELIST  default srvr
#   ZOO_CFG_EXTRA               extra zoo.cfg settings, space-separated key=value
#   ZOO_DATA_DIR                default /data (a volume)
#   ZOO_DATA_LOG_DIR            default /datalog (a volume)
#   ZOO_CONF_DIR                default /conf; a zoo.cfg already there is used as it is
#   JVMFLAGS                    JVM options; default a small heap
#
# The names of this image's first versions still work where the official ones are unset:
# ZK_SERVER_ID, ZK_SERVERS, ZK_TICK_TIME, ZK_INIT_LIMIT, ZK_SYNC_LIMIT, ZK_CFG_EXTRA,
# ZK_MIN_SESSION_TIMEOUT, ZK_MAX_SESSION_TIMEOUT, ZK_JAVA_OPTS.
set -eu

conf_dir=${ZOO_CONF_DIR:-/conf}
data=${ZOO_DATA_DIR:-/data}
datalog=${ZOO_DATA_LOG_DIR:-/datalog}
mkdir -p "$conf_dir" "$data" "$datalog"
tick=${ZOO_TICK_TIME:-${ZK_TICK_TIME:-2000}}
id=${ZOO_MY_ID:-${ZK_SERVER_ID:-1}}
servers=${ZOO_SERVERS:-${ZK_SERVERS:-}}
cfg="$conf_dir/zoo.cfg"

if [ ! -f "$cfg" ]; then
    {
        echo "tickTime=$tick"
        echo "dataDir=$data"
        echo "dataLogDir=$datalog"
        echo "clientPort=2181"
        echo "initLimit=${ZOO_INIT_LIMIT:-${ZK_INIT_LIMIT:-5}}"
        echo "syncLimit=${ZOO_SYNC_LIMIT:-${ZK_SYNC_LIMIT:-2}}"
        echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
        echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
        echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-false}"
        echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
        echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
        echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
        [ -n "${ZK_MIN_SESSION_TIMEOUT:-}" ] && echo "minSessionTimeout=$ZK_MIN_SESSION_TIMEOUT"
        [ -n "${ZK_MAX_SESSION_TIMEOUT:-}" ] && echo "maxSessionTimeout=$ZK_MAX_SESSION_TIMEOUT"
        for kv in ${ZOO_CFG_EXTRA:-${ZK_CFG_EXTRA:-}}; do echo "$kv"; done
        for s in $servers; do echo "$s"; done
    } > "$cfg"
fi
[ -f "$data/myid" ] || echo "$id" > "$data/myid"

echo "zk-entrypoint: server id $id; configuration ($cfg):"
sed 's/^/  /' "$cfg"

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

# exec: the JVM replaces the shell, so docker stop/kill reach it directly.
exec java ${JVMFLAGS:-${ZK_JAVA_OPTS:--Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}} \
    -Djava.security.properties=/etc/zk-java.security \
    -Dorg.slf4j.simpleLogger.logFile=System.out \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dzookeeper.admin.enableServer=false \
    -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
