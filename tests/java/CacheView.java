// Curator's own CuratorCache on a tree, for tests/cache.rs: prints "initialized" once its first
// view is in, then answers commands on stdin: "wait PATH" (prints "seen PATH" once the cache
// has PATH) and "dump" (prints each cached node as path, czxid, mzxid and hex data, tab
// separated, in path order, then "end").
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Comparator;
import java.util.concurrent.CountDownLatch;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryOneTime;

public class CacheView {
    private static final Object changed = new Object();

    private static String hex(byte[] data) {
        StringBuilder out = new StringBuilder();
        if (data != null) {
            for (byte b : data) {
                out.append(String.format("%02x", b));
            }
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        CuratorCache cache = CuratorCache.build(client, args[1]);
        CountDownLatch initialized = new CountDownLatch(1);
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forAll((type, old, data) -> {
                    synchronized (changed) {
                        changed.notifyAll();
                    }
                })
                .forInitialized(initialized::countDown)
                .build());
        cache.start();
        initialized.await();
        System.out.println("initialized");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.startsWith("wait ")) {
                String path = line.substring(5);
                synchronized (changed) {
                    while (!cache.get(path).isPresent()) {
                        changed.wait(100);
                    }
                }
                System.out.println("seen " + path);
            } else if (line.equals("dump")) {
                cache.stream()
                        .sorted(Comparator.comparing(ChildData::getPath))
                        .forEach(d -> System.out.println(d.getPath() + "\t" + d.getStat().getCzxid()
                                + "\t" + d.getStat().getMzxid() + "\t" + hex(d.getData())));
                System.out.println("end");
            }
            System.out.flush();
        }
        cache.close();
        client.close();
    }
}
