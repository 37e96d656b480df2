// The Java worker of tests/interop.rs: one of Apache Curator's recipes on a path that Rust workers
// (zk-recipes) use at the same time. The test compiles this file with javac against Debian's
// jars in /usr/share/java (the same classpath as CuratorBench.java) and runs it as a subprocess:
//
//   java -cp <out>:<jars> CuratorInterop --connect 127.0.0.1:2181/chroot --root /interop/lock \
//        --inside /interop-inside --rounds 40 --hold-ms 2 --timeout-ms 30000
//
// --recipe picks what a round takes (default mutex):
//   mutex         InterProcessMutex on --root
//   rwlock-write  InterProcessReadWriteLock(--root).writeLock()
//   rwlock-read   InterProcessReadWriteLock(--root).readLock()
//   semaphore     a lease of InterProcessSemaphoreV2(--root, --permits)
//   election      leadership of a new LeaderLatch(--root, --name) (started, awaited, closed)
//   count         one increment of SharedCount(--root, seed 0), by trySetCount until it lands;
//                 its "JAVA IN" line ends " count=<the value it wrote>" (no --inside/--holders
//                 check; --wait-go waits for one line before the first round, none after)
//   revoke        no recipe: after "JAVA READY", for each line "REVOKE <path>" on stdin, Curator's
//                 Revoker.attemptRevoke(client, path) (it writes "__REVOKE__" into the lock
//                 node), then "JAVA REVOKED <path>"; ends at the end of stdin
//   group         a GroupMember(--root, --name, payload "payload-<name>") for the whole run;
//                 each round (after its line on stdin with --wait-go) waits until the member
//                 sees --permits members, and its "JAVA IN" line ends " holders=<id>=<payload>,..."
//                 (the members it sees, in id order)
//
// How a round checks that it is not inside with anyone it must exclude:
//   --inside PATH   creates the EPHEMERAL node PATH on entry and deletes it on exit: NodeExists
//                   means another holder is inside (exclusive recipes only).
//   --holders PATH  (instead) PATH is a persistent node whose data lists the holders inside,
//                   comma-separated, each "x:<name>" (exclusive: rwlock-write, election,
//                   mutex) or "s:<name>" (shared: rwlock-read, semaphore). On entry, with a
//                   versioned set_data (compare-and-set), it adds "<kind>:<--name>" if an
//                   exclusive holder finds the list empty, or a shared one finds no exclusive
//                   holder and fewer than --permits holders (a semaphore; readers have no
//                   limit); on leaving it removes its entry the same way.
//
// It prints "JAVA READY" once connected. Then per round: acquire, enter (a conflict prints
// "JAVA OVERLAP <t> <what it found>" and exits 3), print "JAVA IN <t>" (plus
// " holders=<list after entering>" with --holders, and " node=<path>" for an election: the latch
// node, whose sequence is the leadership's term), hold --hold-ms, print "JAVA OUT <t>", leave
// (delete --inside, or take its entry out of --holders), release. Then "JAVA DONE <rounds>".
// An acquire that times out prints "JAVA TIMEOUT <t>" and exits 4; any other error exits 1.
// With --wait-go it waits for a line on stdin before its first round, and holds its first round
// until another line (instead of --hold-ms), so that the test can look at the others meanwhile.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

/** Takes one of Curator's recipes --rounds times, checking exclusion as it goes. */
public final class CuratorInterop {
    /** One acquisition of the recipe under test. */
    interface Recipe {
        /** Acquires within timeoutMs; false when not granted in time. */
        boolean acquire(long timeoutMs) throws Exception;

        /** What to print about the current hold (" node=..."), or "". */
        default String describe() {
            return "";
        }

        void release() throws Exception;
    }

    /** An InterProcessMutex (also each side of an InterProcessReadWriteLock). */
    static Recipe lock(InterProcessMutex mutex) {
        return new Recipe() {
            public boolean acquire(long timeoutMs) throws Exception {
                return mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS);
            }

            public void release() throws Exception {
                mutex.release();
            }
        };
    }

    /** A lease of an InterProcessSemaphoreV2, returned on release. */
    static Recipe semaphore(CuratorFramework client, String root, int permits) {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, root, permits);
        return new Recipe() {
            Lease lease;

            public boolean acquire(long timeoutMs) throws Exception {
                lease = semaphore.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                return lease != null;
            }

            public void release() throws Exception {
                semaphore.returnLease(lease);
                lease = null;
            }
        };
    }

    /** A new LeaderLatch per round: started, awaited, and closed (which deletes its node). */
    static Recipe election(CuratorFramework client, String root, String name) {
        return new Recipe() {
            LeaderLatch latch;

            public boolean acquire(long timeoutMs) throws Exception {
                latch = new LeaderLatch(client, root, name);
                latch.start();
                if (latch.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                    return true;
                }
                latch.close();
                return false;
            }

            public String describe() {
                return " node=" + latch.getOurPath();
            }

            public void release() throws Exception {
                latch.close();
            }
        };
    }

    /** The holders list at --holders, changed by compare-and-set (a versioned setData). */
    static final class Holders {
        final CuratorFramework client;
        final String path;

        Holders(CuratorFramework client, String path) {
            this.client = client;
            this.path = path;
        }

        /**
         * Adds entry ("x:" exclusive, "s:" shared) if it may be inside: an exclusive entry into
         * an empty list, a shared one beside no exclusive holder and fewer than limit holders.
         * The list after entering, or, if it may not, the list found (without entry).
         */
        List<String> enter(String entry, int limit) throws Exception {
            for (;;) {
                Stat stat = new Stat();
                List<String> list = read(stat);
                boolean free = entry.startsWith("x:")
                        ? list.isEmpty()
                        : list.size() < limit && list.stream().noneMatch(h -> h.startsWith("x:"));
                if (!free) {
                    return list;
                }
                list.add(entry);
                if (store(list, stat)) {
                    return list;
                }
            }
        }

        /** Removes entry. */
        void leave(String entry) throws Exception {
            for (;;) {
                Stat stat = new Stat();
                List<String> list = read(stat);
                if (!list.remove(entry)) {
                    throw new IllegalStateException(entry + " is not among the holders " + list);
                }
                if (store(list, stat)) {
                    return;
                }
            }
        }

        List<String> read(Stat stat) throws Exception {
            byte[] data = client.getData().storingStatIn(stat).forPath(path);
            String text = new String(data, StandardCharsets.UTF_8);
            List<String> list = new ArrayList<>();
            if (!text.isEmpty()) {
                list.addAll(Arrays.asList(text.split(",")));
            }
            return list;
        }

        /** Stores list if nobody changed it since stat was read; false if somebody did. */
        boolean store(List<String> list, Stat stat) throws Exception {
            byte[] data = String.join(",", list).getBytes(StandardCharsets.UTF_8);
            try {
                client.setData().withVersion(stat.getVersion()).forPath(path, data);
                return true;
            } catch (KeeperException.BadVersionException e) {
                return false;
            }
        }
    }

    /** Waits for the test's go: a line on stdin. */
    static void awaitGo(BufferedReader stdin) throws Exception {
        if (stdin.readLine() == null) {
            throw new IllegalStateException("stdin closed before the go");
        }
    }

    /** Revokes the lock nodes named on stdin, one "REVOKE <path>" line each. */
    static void revoke(CuratorFramework client) throws Exception {
        System.out.println("JAVA READY");
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null) {
            if (!line.startsWith("REVOKE ")) {
                continue;
            }
            String path = line.substring("REVOKE ".length()).trim();
            org.apache.curator.framework.recipes.locks.Revoker.attemptRevoke(client, path);
            System.out.println("JAVA REVOKED " + path);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        String connect = "127.0.0.1:2181";
        String recipeName = "mutex";
        String root = "/interop/lock";
        String inside = "/interop-inside";
        String holdersPath = null;
        String name = "java";
        int rounds = 40;
        int permits = 1;
        long holdMs = 2;
        long timeoutMs = 30_000;
        boolean waitGo = false;
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--wait-go")) {
                waitGo = true;
                continue;
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(arg + " needs a value");
            }
            String value = args[++i];
            switch (arg) {
                case "--connect": connect = value; break;
                case "--recipe": recipeName = value; break;
                case "--root": root = value; break;
                case "--inside": inside = value; break;
                case "--holders": holdersPath = value; break;
                case "--name": name = value; break;
                case "--rounds": rounds = Integer.parseInt(value); break;
                case "--permits": permits = Integer.parseInt(value); break;
                case "--hold-ms": holdMs = Long.parseLong(value); break;
                case "--timeout-ms": timeoutMs = Long.parseLong(value); break;
                default: throw new IllegalArgumentException("unknown argument " + arg);
            }
        }
        boolean exclusive;
        switch (recipeName) {
            case "mutex": case "rwlock-write": case "election": exclusive = true; break;
            case "rwlock-read": case "semaphore": case "count": case "group": case "revoke":
                exclusive = false; break;
            default: throw new IllegalArgumentException("unknown recipe " + recipeName);
        }
        // How many may be inside together: a semaphore's permits; readers without limit.
        int limit = recipeName.equals("semaphore") ? permits : Integer.MAX_VALUE;
        if (holdersPath == null && !exclusive && !recipeName.equals("revoke")) {
            throw new IllegalArgumentException(recipeName + " shares: it needs --holders");
        }
        String entry = (exclusive ? "x:" : "s:") + name;
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
            if (recipeName.equals("revoke")) {
                revoke(client);
                return;
            }
            if (recipeName.equals("count")) {
                count(client, root, rounds, waitGo);
                return;
            }
            if (recipeName.equals("group")) {
                group(client, root, name, rounds, permits, waitGo, timeoutMs);
                return;
            }
            Recipe recipe;
            switch (recipeName) {
                case "rwlock-write":
                    recipe = lock(new InterProcessReadWriteLock(client, root).writeLock());
                    break;
                case "rwlock-read":
                    recipe = lock(new InterProcessReadWriteLock(client, root).readLock());
                    break;
                case "semaphore": recipe = semaphore(client, root, permits); break;
                case "election": recipe = election(client, root, name); break;
                default: recipe = lock(new InterProcessMutex(client, root)); break;
            }
            Holders holders = holdersPath == null ? null : new Holders(client, holdersPath);
            System.out.println("JAVA READY");
            System.out.flush();
            BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
            if (waitGo) {
                awaitGo(stdin);
            }
            for (int t = 0; t < rounds && code == 0; t++) {
                if (!recipe.acquire(timeoutMs)) {
                    System.out.println("JAVA TIMEOUT " + t);
                    code = 4;
                    break;
                }
                try {
                    String in = "JAVA IN " + t;
                    if (holders == null) {
                        try {
                            client.create().withMode(CreateMode.EPHEMERAL).forPath(inside);
                        } catch (KeeperException.NodeExistsException e) {
                            System.out.println("JAVA OVERLAP " + t);
                            code = 3;
                            break;
                        }
                    } else {
                        List<String> now = holders.enter(entry, limit);
                        if (!now.contains(entry)) {
                            System.out.println("JAVA OVERLAP " + t + " " + String.join(",", now));
                            code = 3;
                            break;
                        }
                        in += " holders=" + String.join(",", now);
                    }
                    System.out.println(in + recipe.describe());
                    System.out.flush();
                    if (waitGo && t == 0) {
                        awaitGo(stdin);
                    } else {
                        Thread.sleep(holdMs);
                    }
                    System.out.println("JAVA OUT " + t);
                    System.out.flush();
                    if (holders == null) {
                        client.delete().forPath(inside);
                    } else {
                        holders.leave(entry);
                    }
                } finally {
                    recipe.release();
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
            System.exit(code);
        }
    }

    /** --recipe group: one GroupMember; each round prints the members it sees. */
    static void group(CuratorFramework client, String path, String name, int rounds,
            int expected, boolean waitGo, long timeoutMs) throws Exception {
        byte[] payload = ("payload-" + name).getBytes(StandardCharsets.UTF_8);
        GroupMember member = new GroupMember(client, path, name, payload);
        member.start();
        try {
            System.out.println("JAVA READY");
            System.out.flush();
            BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
            for (int t = 0; t < rounds; t++) {
                if (waitGo) {
                    awaitGo(stdin);
                }
                // GroupMember reads a cache that follows the group on watches: give it time.
                long deadline = System.currentTimeMillis() + timeoutMs;
                Map<String, byte[]> now = member.getCurrentMembers();
                while (now.size() != expected && System.currentTimeMillis() < deadline) {
                    Thread.sleep(10);
                    now = member.getCurrentMembers();
                }
                List<String> seen = new ArrayList<>();
                for (Map.Entry<String, byte[]> e : new TreeMap<>(now).entrySet()) {
                    seen.add(e.getKey() + "=" + new String(e.getValue(), StandardCharsets.UTF_8));
                }
                System.out.println("JAVA IN " + t + " holders=" + String.join(",", seen));
                System.out.println("JAVA OUT " + t);
                System.out.flush();
            }
            System.out.println("JAVA DONE " + rounds);
        } finally {
            member.close();
        }
    }

    /** --recipe count: --rounds increments of a SharedCount, each by compare-and-set. */
    static void count(CuratorFramework client, String path, int rounds, boolean waitGo)
            throws Exception {
        SharedCount count = new SharedCount(client, path, 0);
        count.start();
        try {
            System.out.println("JAVA READY");
            System.out.flush();
            if (waitGo) {
                awaitGo(new BufferedReader(new InputStreamReader(System.in)));
            }
            for (int t = 0; t < rounds; t++) {
                int wrote;
                while (true) {
                    VersionedValue<Integer> now = count.getVersionedValue();
                    if (count.trySetCount(now, now.getValue() + 1)) {
                        wrote = now.getValue() + 1;
                        break;
                    }
                }
                System.out.println("JAVA IN " + t + " count=" + wrote);
                System.out.println("JAVA OUT " + t);
            }
            System.out.println("JAVA DONE " + rounds);
        } finally {
            count.close();
        }
    }
}
