// The Java worker of tests/interop.rs: Apache Curator's InterProcessMutex on a lock path that Rust
// workers (ZkMutex) use at the same time. The test compiles this file with javac against Debian's
// jars in /usr/share/java (the same classpath as CuratorBench.java) and runs it as a subprocess:
//
//   java -cp <out>:<jars> CuratorInterop --connect 127.0.0.1:2181/chroot --root /interop/lock \
//        --inside /interop-inside --rounds 40 --hold-ms 2 --timeout-ms 30000
//
// It prints "JAVA READY" once connected, then per round: acquire, create the EPHEMERAL node
// --inside (NodeExists = another holder is inside: prints "JAVA OVERLAP <t>", exits 3), print
// "JAVA IN <t>", hold, print "JAVA OUT <t>", delete --inside, release. Then "JAVA DONE <rounds>".
// An acquire that times out prints "JAVA TIMEOUT <t>" and exits 4; any other error exits 1.

import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

/** Takes an InterProcessMutex --rounds times, checking exclusion with an ephemeral node. */
public final class CuratorInterop {
    public static void main(String[] args) throws Exception {
        String connect = "127.0.0.1:2181";
        String root = "/interop/lock";
        String inside = "/interop-inside";
        int rounds = 40;
        long holdMs = 2;
        long timeoutMs = 30_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--connect": connect = args[i + 1]; break;
                case "--root": root = args[i + 1]; break;
                case "--inside": inside = args[i + 1]; break;
                case "--rounds": rounds = Integer.parseInt(args[i + 1]); break;
                case "--hold-ms": holdMs = Long.parseLong(args[i + 1]); break;
                case "--timeout-ms": timeoutMs = Long.parseLong(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        // A short session, so that a crashed run frees its lock node quickly.
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(4_000)
                .connectionTimeoutMs((int) Math.min(timeoutMs, Integer.MAX_VALUE))
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        int code = 0;
        try {
            if (!client.blockUntilConnected((int) timeoutMs, TimeUnit.MILLISECONDS)) {
                System.err.println("Curator could not connect to " + connect);
                System.exit(1);
            }
            InterProcessMutex mutex = new InterProcessMutex(client, root);
            System.out.println("JAVA READY");
            System.out.flush();
            for (int t = 0; t < rounds && code == 0; t++) {
                if (!mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS)) {
                    System.out.println("JAVA TIMEOUT " + t);
                    code = 4;
                    break;
                }
                try {
                    try {
                        client.create().withMode(CreateMode.EPHEMERAL).forPath(inside);
                    } catch (KeeperException.NodeExistsException e) {
                        System.out.println("JAVA OVERLAP " + t);
                        code = 3;
                        break;
                    }
                    System.out.println("JAVA IN " + t);
                    System.out.flush();
                    Thread.sleep(holdMs);
                    System.out.println("JAVA OUT " + t);
                    System.out.flush();
                    client.delete().forPath(inside);
                } finally {
                    mutex.release();
                }
            }
            if (code == 0) {
                System.out.println("JAVA DONE " + rounds);
            }
        } catch (Exception e) {
            e.printStackTrace();
            code = 1;
        } finally {
            System.out.flush();
            client.close();
        }
        System.exit(code);
    }
}
