//! Which tunnel object a route, a record or a rendered object belongs to.

/// Which kind a route points at; a Tunnel is found in the route's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TunnelKind {
    Tunnel,
    ClusterTunnel,
}

impl TunnelKind {
    /// Case-insensitive, as the Go operator accepted it.
    pub fn parse(kind: &str) -> Option<TunnelKind> {
        if kind.eq_ignore_ascii_case("Tunnel") {
            Some(TunnelKind::Tunnel)
        } else if kind.eq_ignore_ascii_case("ClusterTunnel") {
            Some(TunnelKind::ClusterTunnel)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TunnelKind::Tunnel => "Tunnel",
            TunnelKind::ClusterTunnel => "ClusterTunnel",
        }
    }
}

/// A tunnel's identity: same-named tunnels in different namespaces never share routes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TunnelIdentity {
    pub kind: TunnelKind,
    /// Empty for a ClusterTunnel.
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for TunnelIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            TunnelKind::Tunnel => write!(f, "Tunnel {}/{}", self.namespace, self.name),
            TunnelKind::ClusterTunnel => write!(f, "ClusterTunnel {}", self.name),
        }
    }
}
