// Writes a ZooKeeper snapshot in which one persistent node's child counter (its cversion, the
// number ZooKeeper gives the next sequential child) stands just below the signed 32-bit wrap,
// so that a test can reach the wrap in a few creates instead of two billion. Used by
// tests/sequence_wrap.rs, with ZooKeeper's own classes (Debian's libzookeeper-java, the same
// 3.8 as the server image):
//
//   java -cp <out>:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:... \
//        SequenceNearWrap <dir> <path> <cversion> <zxid>
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
        if (args.length != 4) {
            System.err.println("usage: SequenceNearWrap <dir> <path> <cversion> <zxid>");
            System.exit(2);
        }
        File dir = new File(args[0]);
        String path = args[1];
        int cversion = Integer.parseInt(args[2]);
        long zxid = Long.parseLong(args[3]);
        long now = System.currentTimeMillis();

        DataTree tree = new DataTree();
        StringBuilder prefix = new StringBuilder();
        for (String part : path.substring(1).split("/")) {
            prefix.append('/').append(part);
            tree.createNode(prefix.toString(), new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, -1,
                    zxid, now);
        }
        // A child created with an explicit parent cversion sets the parent's counter; deleting
        // it leaves the counter where it is.
        String seed = path + "/seed";
        tree.createNode(seed, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, cversion, zxid, now);
        tree.deleteNode(seed, zxid);
        tree.lastProcessedZxid = zxid;

        FileTxnSnapLog snapshots = new FileTxnSnapLog(dir, dir);
        snapshots.save(tree, new ConcurrentHashMap<>(), true);
        snapshots.close();
        System.out.println("cversion of " + path + ": " + tree.getNode(path).stat.getCversion());
    }
}
