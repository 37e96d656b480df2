// Writes a ZooKeeper snapshot in which persistent nodes' child counters (the count of child
// creates, the number ZooKeeper gives the next sequential child) stand just below i32::MAX,
// so that a test can reach the wrap in a few creates instead of two billion. Used by
// tests/sequence_wrap.rs, with ZooKeeper's own classes (Debian's libzookeeper-java, the same
// 3.8 as the server image):
//
//   java -cp <out>:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:... \
//        SequenceNearWrap <dir> <counter> <zxid> <path>...
//
// <dir> receives version-2/snapshot.<zxid>; a server restarted on that data directory loads
// it, because its zxid is above everything the server logged before.

import java.io.File;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public final class SequenceNearWrap {
    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: SequenceNearWrap <dir> <counter> <zxid> <path>...");
            System.exit(2);
        }
        File dir = new File(args[0]);
        int counter = Integer.parseInt(args[1]);
        long zxid = Long.parseLong(args[2]);
        long now = System.currentTimeMillis();

        DataTree tree = new DataTree();
        for (int i = 3; i < args.length; i++) {
            String path = args[i];
            StringBuilder prefix = new StringBuilder();
            for (String part : path.substring(1).split("/")) {
                prefix.append('/').append(part);
                if (tree.getNode(prefix.toString()) == null) {
                    tree.createNode(prefix.toString(), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                            0, -1, zxid, now);
                }
            }
            // A child created with an explicit parent counter sets the parent's; deleting it
            // leaves the counter where it is.
            String seed = path + "/seed";
            tree.createNode(seed, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, counter, zxid, now);
            tree.deleteNode(seed, zxid);
            System.out.println("creates counted under " + path + ": "
                    + tree.getNode(path).stat.getCversion());
        }
        tree.lastProcessedZxid = zxid;

        FileTxnSnapLog snapshots = new FileTxnSnapLog(dir, dir);
        snapshots.save(tree, new ConcurrentHashMap<>(), true);
        snapshots.close();
    }
}
