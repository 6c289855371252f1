//! What each Gateway of cftunnel's with a TCP or UDP listener asks of its tunnel: the backend
//! Services of the TCPRoutes and UDPRoutes accepted through it (`l4`). `crate::private::gateway`
//! turns them into private routes.
use std::collections::BTreeMap;

use super::attach::{gateway_tunnel, our_class, tunnel_problem};
use super::l4::{L4Routes, read_l4};
use super::protocols::is_l4;
use crate::routes::world::RouteWorld;
use cftunnel_types::gateway::Gateway;
use cftunnel_types::{ServicePorts, TunnelIdentity};

/// One Gateway's private backends.
#[derive(Clone, Debug)]
pub struct PrivateBackends<'w> {
    pub gateway: &'w Gateway,
    /// The tunnel that serves it.
    pub tunnel: TunnelIdentity,
    /// The backend Services of its accepted TCPRoutes and UDPRoutes, each once, by namespace
    /// and name; empty when none is accepted or resolves.
    pub services: Vec<(&'w str, &'w str, &'w ServicePorts)>,
}

/// Every Gateway of cftunnel's classes with a TCP or UDP listener and a tunnel that serves it
/// (one that exists and admits the Gateway's namespace), by namespace and name, each with the
/// backends of the routes accepted through it. A Gateway without such a listener asks for no
/// private route and is not listed.
pub fn private_backends<'w>(world: &'w RouteWorld, l4: &'w L4Routes) -> Vec<PrivateBackends<'w>> {
    let mut out: BTreeMap<(&'w str, &'w str), PrivateBackends<'w>> = BTreeMap::new();
    for gateway in &world.gateways {
        let Some(class) = our_class(world, &gateway.spec.gateway_class_name) else {
            continue;
        };
        if !gateway.spec.listeners.iter().any(|l| is_l4(&l.protocol)) {
            continue;
        }
        let namespace = gateway.metadata.namespace.as_deref().unwrap_or("");
        let Ok(tunnel) = gateway_tunnel(gateway, class) else {
            continue;
        };
        if tunnel_problem(world, &tunnel, namespace).is_some() {
            continue;
        }
        let name = gateway.metadata.name.as_deref().unwrap_or("");
        out.insert(
            (namespace, name),
            PrivateBackends {
                gateway,
                tunnel,
                services: Vec::new(),
            },
        );
    }
    let services = super::service_index(world);
    for route in l4.iter() {
        let read = read_l4(world, &services, route);
        for parent in read.parents.iter().filter(|p| p.served().is_some()) {
            let gateway = &parent.gateway.metadata;
            let key = (
                gateway.namespace.as_deref().unwrap_or(""),
                gateway.name.as_deref().unwrap_or(""),
            );
            let Some(entry) = out.get_mut(&key) else {
                continue;
            };
            for backend in &read.backends {
                let known = entry
                    .services
                    .iter()
                    .any(|(ns, name, _)| (*ns, *name) == (backend.namespace, backend.name));
                if !known {
                    entry
                        .services
                        .push((backend.namespace, backend.name, backend.service));
                }
            }
        }
    }
    for entry in out.values_mut() {
        entry.services.sort_by_key(|(ns, name, _)| (*ns, *name));
    }
    out.into_values().collect()
}
