// The Curator peer of the tree-cache benchmark (bench/src/cache_bench): one JSON line per
// command on stdin.
//   view ROOT       builds a CuratorCache on ROOT and waits for its first view:
//                   {"ms":..., "nodes":..., "heap_bytes":...} (heap used after a GC, with the
//                   cache minus before it); the cache stays open for "events"
//   events PATHS    sets the data of each path in turn (this client) and waits for the cache's
//                   change event of it: {"event_us":[...], "write_us":[...]}; then closes the
//                   cache
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryOneTime;

public class CacheBench {
    private static long usedHeap() {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    private static String join(List<Long> values) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            out.append(i == 0 ? "" : ",").append(values.get(i));
        }
        return out.append("]").toString();
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        CuratorCache cache = null;
        BlockingQueue<String> changed = new ArrayBlockingQueue<>(1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.split(" ");
            if (w[0].equals("view")) {
                long before = usedHeap();
                long start = System.nanoTime();
                CuratorCache built = CuratorCache.build(client, w[1]);
                CountDownLatch initialized = new CountDownLatch(1);
                built.listenable().addListener(CuratorCacheListener.builder()
                        .forChanges((old, data) -> changed.offer(data.getPath()))
                        .forInitialized(initialized::countDown)
                        .build());
                built.start();
                initialized.await();
                long ms = (System.nanoTime() - start) / 1_000_000;
                long nodes = built.size();
                long heap = usedHeap() - before;
                cache = built;
                System.out.println("{\"ms\":" + ms + ",\"nodes\":" + nodes + ",\"heap_bytes\":" + heap + "}");
            } else if (w[0].equals("events")) {
                List<Long> events = new ArrayList<>();
                List<Long> writes = new ArrayList<>();
                changed.clear();
                for (int i = 1; i < w.length; i++) {
                    byte[] data = ("c" + i + "-" + System.nanoTime()).getBytes(StandardCharsets.UTF_8);
                    long start = System.nanoTime();
                    client.setData().forPath(w[i], data);
                    writes.add((System.nanoTime() - start) / 1000);
                    while (true) {
                        String path = changed.poll(10, TimeUnit.SECONDS);
                        if (path == null || path.equals(w[i])) {
                            break;
                        }
                    }
                    events.add((System.nanoTime() - start) / 1000);
                }
                if (cache != null) {
                    cache.close();
                    cache = null;
                }
                System.out.println("{\"event_us\":" + join(events) + ",\"write_us\":" + join(writes) + "}");
            }
            System.out.flush();
        }
        client.close();
    }
}
