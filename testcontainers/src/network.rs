//! An ensemble's private network, on which every member keeps one address for its life.
//!
//! Docker hands out addresses on a network dynamically: a member started again after a kill,
//! or reconnected after a cut, takes the lowest free one, which may be another member's old
//! address once two members were down at once. ZooKeeper (3.8) keeps the address it resolved
//! for a peer, so a peer then dials the wrong member, and a member cut off for 3 s stayed out
//! of the ensemble for over 480 s in the fault soak (its election messages reached every
//! member but the leader, whose answers went elsewhere). Real servers keep their addresses
//! through a partition, so the harness pins them: the network gets a subnet of its own
//! (required for fixed addresses) and each member, once started, is attached again at the
//! address it was given; Docker keeps a fixed address through restarts and reconnects.

use testcontainers::bollard::models::{
    EndpointIpamConfig, EndpointSettings, Ipam, IpamConfig, NetworkConnectRequest,
    NetworkCreateRequest, NetworkDisconnectRequest,
};
use testcontainers::bollard::query_parameters::InspectNetworkOptions;
use testcontainers::bollard::Docker;

use crate::{docker, HarnessError};

/// How many times a subnet Docker proposed may be taken by someone else before it is
/// recreated.
const ATTEMPTS: usize = 5;

/// Creates network `name` with a subnet of its own: the one Docker picks from its address
/// pools for a network made without one (so the daemon's own configuration decides), made
/// explicit.
pub(crate) async fn create(name: &str) -> Result<(), HarnessError> {
    let docker = docker::client().await?;
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        let subnet = proposed_subnet(&docker, name).await?;
        let request = NetworkCreateRequest {
            name: name.to_owned(),
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(subnet.clone()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        match docker.create_network(request).await {
            Ok(_) => return Ok(()),
            // Another network took that pool between our two creates: ask again.
            Err(e) => last = format!("subnet {subnet}: {e}"),
        }
    }
    Err(HarnessError::docker(
        format!("creating network {name}"),
        last,
    ))
}

/// The subnet Docker gives a network created without one (created and removed again).
async fn proposed_subnet(docker: &Docker, name: &str) -> Result<String, HarnessError> {
    let error = |e| HarnessError::docker(format!("creating network {name}"), e);
    docker
        .create_network(NetworkCreateRequest {
            name: name.to_owned(),
            ..Default::default()
        })
        .await
        .map_err(error)?;
    let inspected = docker
        .inspect_network(name, None::<InspectNetworkOptions>)
        .await;
    let _ = docker.remove_network(name).await;
    inspected
        .map_err(error)?
        .ipam
        .and_then(|ipam| ipam.config)
        .and_then(|configs| configs.into_iter().find_map(|c| c.subnet))
        .ok_or_else(|| HarnessError::Container(format!("network {name} got no subnet")))
}

/// The endpoint settings that attach a container at `address`.
pub(crate) fn at(address: &str) -> EndpointSettings {
    EndpointSettings {
        ipam_config: Some(EndpointIpamConfig {
            ipv4_address: Some(address.to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Attaches the running container `id` again at the address it has on `network`, fixed from
/// now on; returns it.
pub(crate) async fn pin(id: &str, network: &str) -> Result<String, HarnessError> {
    let docker = docker::client().await?;
    let error = |what: &str, e: String| HarnessError::docker(format!("{what} container {id}"), e);
    let inspected = docker
        .inspect_container(id, None)
        .await
        .map_err(|e| error("inspecting", e.to_string()))?;
    let address = inspected
        .network_settings
        .and_then(|s| s.networks)
        .and_then(|mut n| n.remove(network))
        .and_then(|e| e.ip_address)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| error("finding the address of", format!("not on {network}")))?;
    docker
        .disconnect_network(
            network,
            NetworkDisconnectRequest {
                container: id.to_owned(),
                force: Some(true),
            },
        )
        .await
        .map_err(|e| error("detaching", e.to_string()))?;
    docker
        .connect_network(
            network,
            NetworkConnectRequest {
                container: id.to_owned(),
                endpoint_config: Some(at(&address)),
            },
        )
        .await
        .map_err(|e| error("attaching", e.to_string()))?;
    Ok(address)
}

/// Removes network `name`, from a thread of its own (callable from `Drop`, on any runtime).
pub(crate) fn remove_blocking(name: String) {
    let _ = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        // A client of its own: the shared one's pooled connections belong to the caller's
        // runtime, which waits for this thread.
        let Ok(docker) = Docker::connect_with_defaults() else {
            return;
        };
        runtime.block_on(async {
            let _ = docker.remove_network(&name).await;
        });
    })
    .join();
}
