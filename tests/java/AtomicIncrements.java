// Java peer of tests/atomic.rs: THREADS threads each increment Curator's DistributedAtomicLong
// at PATH INCREMENTS times (again until succeeded), promoted to the InterProcessMutex at LOCK;
// prints "tries N" (optimistic + promoted tries over all increments) at the end.
// Usage: AtomicIncrements CONNECT PATH LOCK THREADS INCREMENTS
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.atomic.PromotedToLock;
import org.apache.curator.retry.BoundedExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public class AtomicIncrements {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], lock = args[2];
        int threads = Integer.parseInt(args[3]);
        int increments = Integer.parseInt(args[4]);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new RetryNTimes(3, 100));
        client.start();
        client.blockUntilConnected();
        AtomicLong tries = new AtomicLong();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            workers[t] = new Thread(() -> {
                try {
                    PromotedToLock promoted = PromotedToLock.builder().lockPath(lock)
                            .timeout(5, TimeUnit.SECONDS).build();
                    DistributedAtomicLong value = new DistributedAtomicLong(client, path,
                            new BoundedExponentialBackoffRetry(1, 20, 4), promoted);
                    for (int i = 0; i < increments; i++) {
                        while (true) {
                            AtomicValue<Long> r = value.increment();
                            tries.addAndGet(r.getStats().getOptimisticTries() + r.getStats().getPromotedLockTries());
                            if (r.succeeded()) break;
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(2);
                }
            });
            workers[t].start();
        }
        for (Thread w : workers) w.join();
        System.out.println("tries " + tries.get());
        client.close();
    }
}
