// The Curator peer of the benchmark (bench/, the zk-recipes-bench crate): Apache Curator's
// InterProcessMutex on the same workloads as the Rust side. The Rust benchmark compiles this file
// with javac against Debian's jars in /usr/share/java (libcurator-recipes-java) and runs it as one
// subprocess for the whole run, which takes its windows one command at a time, so that the Rust
// driver can interleave them with its own:
//
//   java -cp <out>:<jars> CuratorBench --connect 127.0.0.1:2181 --root /bench/curator \
//        --jit-warmup-ms 2000
//   (prints {"ready":true} once warm; then, per line on stdin)
//   run contended8 /bench/curator/round-1/contended8 1000 5000    (workload, path, warm-up ms, window ms)
//   (prints one JSON object on one line: the window's figures, or its error)
//   quit                                                           (or the end of stdin)
//
// Workloads: uncontended (1 lock, 1 contender), contended8 (1 lock, 8 contenders, a session each),
// locks64x4 (64 locks, 4 contenders each, 4 sessions), and handover: LeaderLatch on two sessions,
// the protocol of the Rust side (bench/src/handover.rs): the follower starts its latch and awaits
// leadership in a thread of its own; once the server reports one more watch (`wchs`: the follower
// watches the leader's node), the leader closes its latch; a handover is the time from close() to
// the follower's await() returning. Then the roles swap, with a new latch for the new follower.
//
// First 8 contenders churn unmeasured for --jit-warmup-ms, and two latches hand leadership over for
// a quarter of that, so that the JIT has compiled Curator's and ZooKeeper's hot paths (the Rust
// side needs no such thing). Then, per window, timing mirrors
// the Rust side: a warm-up (connections, first nodes), then a measurement window; a cycle
// counts when its grant falls in the window, latencies when the whole acquire does. Acquire
// latency is from calling acquire() to its return; handoff is from the holder's call to release()
// to the next holder's return from acquire() (one process, one clock). Process CPU time (every JVM
// thread: ours, Curator's, ZooKeeper's, JIT and GC) is read around the window, and so are the
// server's log syncs (`mntr`) and last zxid (`srvr`), as on the Rust side.

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

/** Runs InterProcessMutex workloads and prints their figures as JSON lines. */
public final class CuratorBench {
    private static String connect = "127.0.0.1:2181";
    private static String root = "/bench/curator";
    /** Churn before the first window, so that the JIT has compiled the hot paths. */
    private static long jitWarmupMs = 2000;

    /** Window bounds (System.nanoTime); a cycle counts when granted inside. */
    private static volatile long windowStart = Long.MAX_VALUE;
    private static volatile long windowEnd = Long.MAX_VALUE;
    private static volatile boolean stop = false;

    /** A growable array of longs (latency samples in nanoseconds), one per thread. */
    private static final class Samples {
        long[] values = new long[1024];
        int size = 0;

        void add(long v) {
            if (size == values.length) {
                values = Arrays.copyOf(values, size * 2);
            }
            values[size++] = v;
        }
    }

    /** What one contender thread measured. */
    private static final class Tally {
        final Samples acquire = new Samples();
        final Samples handoff = new Samples();
        long cycles = 0;
        long violations = 0;
        Exception error = null;
    }

    /** One lock path, shared by its contenders: the last release time and a holder flag. */
    private static final class Lock {
        final String path;
        final AtomicLong releasedAt = new AtomicLong(0);
        final AtomicBoolean held = new AtomicBoolean(false);

        Lock(String path) {
            this.path = path;
        }
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--connect": connect = args[i + 1]; break;
                case "--root": root = args[i + 1]; break;
                case "--jit-warmup-ms": jitWarmupMs = Long.parseLong(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown flag " + args[i]);
            }
        }
        if (jitWarmupMs > 0) {
            locks("jit-warmup", root + "/jit-warmup", 1, 8, 0, jitWarmupMs);
            handover(root + "/jit-warmup-handover", 0, jitWarmupMs / 4);
        }
        System.out.println("{\"ready\":true}");
        System.out.flush();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].isEmpty()) {
                continue;
            }
            if (words[0].equals("quit")) {
                break;
            }
            String answer;
            if (words[0].equals("run") && words.length == 5) {
                String workload = words[1];
                try {
                    answer = window(workload, words[2], Long.parseLong(words[3]), Long.parseLong(words[4]));
                } catch (Exception e) {
                    answer = "{\"workload\":" + quote(workload) + ",\"error\":" + quote(e.toString()) + "}";
                }
            } else {
                answer = "{\"error\":" + quote("unknown command: " + line) + "}";
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    /** One window of `workload` under `path`: its figures as one line of JSON. */
    private static String window(String workload, String path, long warmupMs, long measureMs) throws Exception {
        switch (workload) {
            case "uncontended": return locks(workload, path, 1, 1, warmupMs, measureMs);
            case "contended8": return locks(workload, path, 1, 8, warmupMs, measureMs);
            case "locks64x4": return locks(workload, path, 64, 4, warmupMs, measureMs);
            case "handover": return handover(path, warmupMs, measureMs);
            default: throw new IllegalArgumentException("unknown workload " + workload);
        }
    }

    /**
     * Leader handovers between two LeaderLatch candidates on `path` for `warmupMs`, then measured
     * for `measureMs`; the figures as one line of JSON.
     */
    private static String handover(String path, long warmupMs, long measureMs) throws Exception {
        CuratorFramework[] sessions = {client(), client()};
        Samples samples = new Samples();
        String error = null;
        LeaderLatch leader = new LeaderLatch(sessions[0], path, "candidate-0");
        try {
            leader.start();
            leader.await();
            int l = 0;
            long start = System.nanoTime() + warmupMs * 1_000_000L;
            long end = start + measureMs * 1_000_000L;
            while (System.nanoTime() < end) {
                int f = 1 - l;
                Long before = totalWatches();
                LeaderLatch follower = new LeaderLatch(sessions[f], path, "candidate-" + f);
                long[] returned = {0};
                Exception[] failed = {null};
                Thread campaign = new Thread(() -> {
                    try {
                        follower.await();
                        returned[0] = System.nanoTime();
                    } catch (Exception e) {
                        failed[0] = e;
                    }
                }, "follower");
                campaign.setDaemon(true);
                follower.start();
                campaign.start();
                waitWatching(before);
                long resigned = System.nanoTime();
                leader.close();
                campaign.join(30_000);
                if (failed[0] != null) {
                    throw failed[0];
                }
                if (returned[0] == 0) {
                    throw new IllegalStateException("the follower was not elected within 30 s");
                }
                if (resigned >= start && returned[0] < end) {
                    samples.add(returned[0] - resigned);
                }
                leader = follower;
                l = f;
            }
        } catch (Exception e) {
            error = e.toString();
        } finally {
            try {
                leader.close();
            } catch (Exception ignored) {
                // already closed
            }
            for (CuratorFramework s : sessions) {
                s.close();
            }
        }
        StringBuilder out = new StringBuilder();
        out.append("{\"workload\":\"handover\"");
        out.append(",\"handovers\":").append(samples.size);
        out.append(",\"seconds\":").append(measureMs / 1e3);
        out.append(",\"handover_p50_us\":").append(percentileUs(samples, 0.50));
        out.append(",\"handover_p99_us\":").append(percentileUs(samples, 0.99));
        out.append(",\"handover_samples\":").append(samples.size);
        out.append(",\"handover_q_us\":").append(quantilesUs(samples));
        if (error != null) {
            out.append(",\"error\":").append(quote(error));
        }
        return out.append('}').toString();
    }

    /** The server's total watch count (`wchs`); null when it does not answer. */
    private static Long totalWatches() {
        try {
            for (String line : fourLetter("wchs").split("\n")) {
                if (line.startsWith("Total watches:")) {
                    return Long.parseLong(line.substring("Total watches:".length()).trim());
                }
            }
        } catch (Exception e) {
            // not reported
        }
        return null;
    }

    /**
     * Waits until the server holds more watches than `before` (the follower watches the leader's
     * node), or, when it does not report them, a moment (as bench/src/handover.rs).
     */
    private static void waitWatching(Long before) throws Exception {
        if (before == null) {
            Thread.sleep(5);
            return;
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            Long now = totalWatches();
            if (now != null && now > before) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the follower set no watch within 10 s");
            }
            Thread.sleep(0, 200_000);
        }
    }

    /** A JSON string. */
    private static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static CuratorFramework client() throws InterruptedException {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(10_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        if (!client.blockUntilConnected(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Curator could not connect to " + connect);
        }
        return client;
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /**
     * `locks` lock paths under `dir`, `perLock` contenders on each; contender i of every lock
     * shares session i (one session per contender for a single lock, as in the Rust workloads).
     * Returns the figures as one line of JSON.
     */
    private static String locks(String name, String dir, int locks, int perLock, long warmupMs, long measureMs)
            throws Exception {
        stop = false;
        windowStart = Long.MAX_VALUE;
        windowEnd = Long.MAX_VALUE;
        List<CuratorFramework> sessions = new ArrayList<>();
        for (int i = 0; i < perLock; i++) {
            sessions.add(client());
        }
        List<Thread> threads = new ArrayList<>();
        List<Tally> tallies = new ArrayList<>();
        for (int l = 0; l < locks; l++) {
            Lock lock = new Lock(dir + "/lock-" + l);
            for (int c = 0; c < perLock; c++) {
                InterProcessMutex mutex = new InterProcessMutex(sessions.get(c), lock.path);
                Tally tally = new Tally();
                tallies.add(tally);
                boolean handoffs = perLock > 1; // alone on a lock, the next grant is its own
                Thread t = new Thread(() -> contend(mutex, lock, tally, handoffs), name + "-" + l + "-" + c);
                t.setDaemon(true);
                threads.add(t);
            }
        }
        for (Thread t : threads) {
            t.start();
        }
        Thread.sleep(warmupMs);
        long[] log0 = logCounters();
        long cpu0 = cpuNanos();
        long start = System.nanoTime();
        windowStart = start;
        windowEnd = start + measureMs * 1_000_000L;
        Thread.sleep(measureMs);
        long cpu1 = cpuNanos();
        long end = System.nanoTime();
        long[] log1 = logCounters();
        stop = true;
        for (Thread t : threads) {
            t.join(30_000);
        }
        Samples acquire = new Samples();
        Samples handoff = new Samples();
        long cycles = 0;
        long violations = 0;
        String error = null;
        for (Tally t : tallies) {
            cycles += t.cycles;
            violations += t.violations;
            for (int i = 0; i < t.acquire.size; i++) acquire.add(t.acquire.values[i]);
            for (int i = 0; i < t.handoff.size; i++) handoff.add(t.handoff.values[i]);
            if (t.error != null && error == null) error = t.error.toString();
        }
        for (CuratorFramework s : sessions) {
            s.close();
        }
        double seconds = (Math.min(end, windowEnd) - start) / 1e9;
        StringBuilder out = new StringBuilder();
        out.append("{\"workload\":\"").append(name).append('"');
        out.append(",\"cycles\":").append(cycles);
        out.append(",\"seconds\":").append(seconds);
        out.append(",\"cycles_per_s\":").append(cycles / seconds);
        out.append(",\"acquire_p50_us\":").append(percentileUs(acquire, 0.50));
        out.append(",\"acquire_p99_us\":").append(percentileUs(acquire, 0.99));
        out.append(",\"handoff_p50_us\":").append(percentileUs(handoff, 0.50));
        out.append(",\"handoff_p99_us\":").append(percentileUs(handoff, 0.99));
        out.append(",\"acquire_samples\":").append(acquire.size);
        out.append(",\"handoff_samples\":").append(handoff.size);
        out.append(",\"acquire_q_us\":").append(quantilesUs(acquire));
        out.append(",\"handoff_q_us\":").append(quantilesUs(handoff));
        out.append(",\"cpu_ms\":").append((cpu1 - cpu0) / 1e6);
        if (log0 != null && log1 != null) {
            out.append(",\"log_syncs\":").append(log1[0] - log0[0]);
            out.append(",\"log_writes\":").append(log1[1] - log0[1]);
            out.append(",\"log_requests\":").append(log1[2] - log0[2]);
            out.append(",\"log_replies\":").append(log1[3] - log0[3]);
        }
        out.append(",\"violations\":").append(violations);
        if (error != null) {
            out.append(",\"error\":").append(quote(error));
        }
        return out.append('}').toString();
    }

    /**
     * The server's log syncs so far (`zk_cnt_sync_processor_batch_size` of `mntr`) and its last
     * zxid (`srvr`), and the packets it took in and sent out (`zk_packets_received`,
     * `zk_packets_sent`); null when it does not answer them (same as bench/src/zk.rs).
     */
    private static long[] logCounters() {
        try {
            Long syncs = null, received = null, sent = null;
            for (String line : fourLetter("mntr").split("\n")) {
                String value = line.substring(line.indexOf('\t') + 1).trim();
                if (line.startsWith("zk_cnt_sync_processor_batch_size")) {
                    syncs = Long.parseLong(value);
                } else if (line.startsWith("zk_packets_received")) {
                    received = Long.parseLong(value);
                } else if (line.startsWith("zk_packets_sent")) {
                    sent = Long.parseLong(value);
                }
            }
            Long zxid = null;
            for (String line : fourLetter("srvr").split("\n")) {
                if (line.startsWith("Zxid: 0x")) {
                    zxid = Long.parseUnsignedLong(line.substring("Zxid: 0x".length()).trim(), 16);
                }
            }
            return syncs == null || zxid == null || received == null || sent == null
                    ? null
                    : new long[] {syncs, zxid, received, sent};
        } catch (Exception e) {
            return null;
        }
    }

    /** A four-letter word to the first server of the connect string. */
    private static String fourLetter(String word) throws Exception {
        String hostPort = connect.split("/")[0].split(",")[0].trim();
        int colon = hostPort.lastIndexOf(':');
        try (Socket socket = new Socket(hostPort.substring(0, colon),
                Integer.parseInt(hostPort.substring(colon + 1)))) {
            socket.setSoTimeout(5000);
            OutputStream out = socket.getOutputStream();
            out.write(word.getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream reply = new ByteArrayOutputStream();
            in.transferTo(reply);
            return reply.toString(StandardCharsets.UTF_8);
        }
    }

    /** The points of a latency's CDF the report keeps (bench/src/measure.rs QUANTILES). */
    private static final double[] QUANTILES = {
        0.01, 0.05, 0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 0.95, 0.99, 0.999,
    };

    /** The latency at each of QUANTILES in microseconds, as a JSON array; empty without samples. */
    private static String quantilesUs(Samples s) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; s.size > 0 && i < QUANTILES.length; i++) {
            out.append(i == 0 ? "" : ",").append(percentileUs(s, QUANTILES[i]));
        }
        return out.append(']').toString();
    }

    /** Nearest-rank percentile in microseconds; -1 without samples (same rule as bench/src/measure.rs). */
    private static double percentileUs(Samples s, double p) {
        if (s.size == 0) {
            return -1;
        }
        long[] v = Arrays.copyOf(s.values, s.size);
        Arrays.sort(v);
        int rank = (int) Math.ceil(p * v.length);
        return v[Math.max(rank, 1) - 1] / 1000.0;
    }

    private static void contend(InterProcessMutex mutex, Lock lock, Tally tally, boolean handoffs) {
        try {
            while (!stop) {
                long asked = System.nanoTime();
                mutex.acquire();
                long granted = System.nanoTime();
                if (!lock.held.compareAndSet(false, true)) {
                    tally.violations++;
                }
                long released = lock.releasedAt.getAndSet(0);
                if (granted >= windowStart && granted < windowEnd) {
                    tally.cycles++;
                    if (asked >= windowStart) {
                        tally.acquire.add(granted - asked);
                    }
                    if (handoffs && released != 0 && released >= windowStart) {
                        tally.handoff.add(granted - released);
                    }
                }
                lock.held.set(false);
                lock.releasedAt.set(System.nanoTime());
                mutex.release();
            }
        } catch (Exception e) {
            tally.error = e;
        }
    }
}
