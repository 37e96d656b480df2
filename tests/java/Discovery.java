// Curator's own ServiceDiscovery (curator-x-discovery, its default JSON serializer), for
// tests/discovery.rs. Connects with a 4 s session, prints "ready", then answers commands on
// stdin: "register NAME ID ADDRESS PORT" (a DYNAMIC instance with a map payload and a uriSpec;
// prints "registered"), "query NAME" (each instance's JSON on a line, then "end") and
// "wait-count NAME N" (prints "count N" once NAME has N instances).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.x.discovery.ServiceDiscovery;
import org.apache.curator.x.discovery.ServiceDiscoveryBuilder;
import org.apache.curator.x.discovery.ServiceInstance;
import org.apache.curator.x.discovery.UriSpec;
import org.apache.curator.x.discovery.details.JsonInstanceSerializer;

public class Discovery {
    public static void main(String[] args) throws Exception {
        CuratorFramework client =
                CuratorFrameworkFactory.newClient(args[0], 4000, 10000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        JsonInstanceSerializer<Object> json = new JsonInstanceSerializer<>(Object.class);
        ServiceDiscovery<Object> discovery = ServiceDiscoveryBuilder.builder(Object.class)
                .client(client)
                .basePath(args[1])
                .serializer(json)
                .build();
        discovery.start();
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.split(" ");
            switch (w[0]) {
                case "register": {
                    Map<String, Object> payload = new LinkedHashMap<>();
                    payload.put("zone", "eu-1");
                    payload.put("weight", 3);
                    ServiceInstance<Object> instance = ServiceInstance.<Object>builder()
                            .name(w[1])
                            .id(w[2])
                            .address(w[3])
                            .port(Integer.parseInt(w[4]))
                            .payload(payload)
                            .uriSpec(new UriSpec("{scheme}://{address}:{port}/api"))
                            .build();
                    discovery.registerService(instance);
                    System.out.println("registered");
                    break;
                }
                case "query":
                    for (ServiceInstance<Object> instance : discovery.queryForInstances(w[1])) {
                        System.out.println(new String(json.serialize(instance), StandardCharsets.UTF_8));
                    }
                    System.out.println("end");
                    break;
                case "wait-count": {
                    int n = Integer.parseInt(w[2]);
                    while (discovery.queryForInstances(w[1]).size() != n) {
                        Thread.sleep(20);
                    }
                    System.out.println("count " + n);
                    break;
                }
                default:
                    System.out.println("unknown " + line);
            }
            System.out.flush();
        }
    }
}
