//! What the planner decides: record writes, and conflicts that name the record in the way.
use std::fmt;

use cftunnel_cloudflare::{DnsRecord, DnsRecordType, NewDnsRecord};
use cftunnel_types::TunnelIdentity;

use super::names::{normalize_name, tunnel_target};
use super::txt::ManagedTxt;

/// A record as Cloudflare holds it, as messages name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordRef {
    /// Cloudflare's record id; `None` for a record that does not exist yet.
    pub id: Option<String>,
    pub record_type: String,
    pub name: String,
    pub content: String,
}

impl RecordRef {
    pub fn of(record: &DnsRecord) -> Self {
        Self {
            id: Some(record.id.clone()),
            record_type: record.record_type.to_ascii_uppercase(),
            name: normalize_name(&record.name),
            content: record.content.clone(),
        }
    }
}

impl fmt::Display for RecordRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> {}", self.record_type, self.name, self.content)
    }
}

/// Where the TXT's `DnsId` comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsIdSource {
    /// The CNAME exists with this id.
    Record(String),
    /// The CNAME is created by an earlier change of the same hostname in this plan.
    CreatedCname,
}

/// A record cftunnel wants to exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DesiredRecord {
    /// The proxied CNAME `<hostname>` → `<tunnel_id>.cfargotunnel.com`, commented with the marker.
    Cname {
        name: String,
        tunnel_id: String,
        marker: String,
    },
    /// The `_managed.` TXT in the Go operator's format (commented with the marker too).
    Txt {
        name: String,
        tunnel_name: String,
        tunnel_id: String,
        owner: Option<String>,
        dns_id: DnsIdSource,
        marker: String,
    },
}

impl DesiredRecord {
    pub fn name(&self) -> &str {
        match self {
            Self::Cname { name, .. } | Self::Txt { name, .. } => name,
        }
    }

    pub fn record_type(&self) -> DnsRecordType {
        match self {
            Self::Cname { .. } => DnsRecordType::Cname,
            Self::Txt { .. } => DnsRecordType::Txt,
        }
    }

    /// The TXT payload, given the id of the CNAME created earlier in the same hostname's changes.
    pub(crate) fn txt_value(&self, created_cname: Option<&str>) -> Option<ManagedTxt> {
        let Self::Txt {
            tunnel_name,
            tunnel_id,
            owner,
            dns_id,
            ..
        } = self
        else {
            return None;
        };
        let dns_id = match dns_id {
            DnsIdSource::Record(id) => id.clone(),
            DnsIdSource::CreatedCname => created_cname?.to_string(),
        };
        Some(ManagedTxt {
            dns_id,
            tunnel_name: tunnel_name.clone(),
            tunnel_id: tunnel_id.clone(),
            owner: owner.clone(),
        })
    }

    /// The request body; `None` for a TXT whose CNAME was to be created but was not.
    pub fn body(&self, created_cname: Option<&str>) -> Option<NewDnsRecord> {
        match self {
            Self::Cname {
                name,
                tunnel_id,
                marker,
            } => Some(NewDnsRecord::tunnel_cname(
                name.clone(),
                tunnel_id,
                Some(marker.clone()),
            )),
            Self::Txt { name, marker, .. } => {
                let value = self.txt_value(created_cname)?;
                Some(NewDnsRecord::txt(
                    name.clone(),
                    value.to_content(),
                    Some(marker.clone()),
                ))
            }
        }
    }

    /// The request body when the CNAME's id cannot be known yet because the CNAME is created in
    /// the same batch: a TXT then carries an empty `DnsId`, set by a patch once the CNAME exists
    /// (the TXT is ours by its comment meanwhile, so the hostname never lacks its TXT).
    pub fn body_in_batch(&self) -> NewDnsRecord {
        match self {
            Self::Cname { .. } => self.body(None),
            Self::Txt { .. } => self.body(Some("")),
        }
        .unwrap_or_else(|| NewDnsRecord::txt(self.name(), String::new(), None))
    }

    /// True if this TXT takes its `DnsId` from a CNAME created in the same changes.
    pub fn waits_for_cname_id(&self) -> bool {
        matches!(
            self,
            Self::Txt {
                dns_id: DnsIdSource::CreatedCname,
                ..
            }
        )
    }

    /// True if `record` already is what this asks for (a TXT by its payload in the written, bare
    /// JSON form: the Go operator's records match and cost no write; a quoted one is rewritten).
    pub(crate) fn is_met_by(&self, record: &DnsRecord) -> bool {
        if !record.is_type(self.record_type()) || normalize_name(&record.name) != self.name() {
            return false;
        }
        match self {
            Self::Cname {
                tunnel_id, marker, ..
            } => {
                normalize_name(&record.content) == tunnel_target(tunnel_id)
                    && record.proxied == Some(true)
                    && record.ttl.is_none_or(|ttl| ttl == 1)
                    && record.comment.as_deref() == Some(marker.as_str())
            }
            Self::Txt { dns_id, .. } => match dns_id {
                DnsIdSource::CreatedCname => false,
                DnsIdSource::Record(_) => self
                    .txt_value(None)
                    .is_some_and(|value| value.is_written_as(&record.content)),
            },
        }
    }

    /// How messages name it.
    pub fn to_ref(&self) -> RecordRef {
        let content = match self {
            Self::Cname { tunnel_id, .. } => tunnel_target(tunnel_id),
            Self::Txt { .. } => self
                .txt_value(Some("<new CNAME id>"))
                .map(|v| v.to_content())
                .unwrap_or_default(),
        };
        RecordRef {
            id: None,
            record_type: self.record_type().as_str().to_string(),
            name: self.name().to_string(),
            content,
        }
    }
}

/// One write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsAction {
    Create(DesiredRecord),
    /// PATCH of a record of ours; with `take_over` (a record that was not ours, replaced under
    /// `overwrite_unmanaged`) a PUT, so nothing of the former owner (tags) survives.
    Update {
        current: RecordRef,
        desired: DesiredRecord,
        take_over: bool,
    },
    /// Deletes a record of ours, or one in the way under `overwrite_unmanaged` (`take_over`).
    Delete {
        current: RecordRef,
        take_over: bool,
    },
}

/// One write on behalf of one tunnel. Changes of one hostname are consecutive and ordered so
/// that each may depend on the previous ones (CNAME before TXT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsChange {
    pub tunnel: TunnelIdentity,
    /// The routed hostname the change serves (for a TXT, the hostname it vouches for).
    pub hostname: String,
    pub action: DnsAction,
}

/// Why a record in the way of a routed hostname is not ours.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConflictReason {
    /// Points at this operator's tunnel but carries no marker and no `_managed` TXT vouches for it.
    NoOwnershipProof,
    /// A record cftunnel did not write.
    Unmanaged,
    /// Carries another owner's marker (another cftunnel installation or tunnel object).
    OtherOwner { marker: String },
    /// Carries our marker but points at a tunnel id that is neither current nor previous.
    PointsElsewhere,
    /// A `_managed` TXT that names another tunnel.
    TxtNamesOtherTunnel {
        tunnel_id: String,
        tunnel_name: String,
    },
    /// A `_managed` TXT that is not in the ownership format.
    TxtNotManaged,
    /// Another tunnel of this operator routes the hostname and keeps the record.
    RoutedByOtherTunnel { winner: TunnelIdentity },
    /// A `_managed` TXT naming this tunnel written by another cluster (its `Owner`).
    OtherCluster { cluster: String },
}

impl ConflictReason {
    /// Is the record another cftunnel cluster's (which may let go of it later)?
    pub fn is_other_cluster(&self) -> bool {
        match self {
            Self::OtherCluster { .. } => true,
            // This cluster's own markers are siblings (`ownership.rs`), never conflicts.
            Self::OtherOwner { marker } => super::marker::marker_cluster(marker).is_some(),
            _ => false,
        }
    }
}

impl fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoOwnershipProof => f.write_str(
                "it points at this tunnel but has no cftunnel ownership comment and no _managed TXT naming the tunnel",
            ),
            Self::Unmanaged => f.write_str("it was not created by cftunnel"),
            Self::OtherOwner { marker } => write!(f, "its comment says it belongs to {marker:?}"),
            Self::PointsElsewhere => {
                f.write_str("it points at a tunnel id that is not this tunnel's current or a previous one")
            }
            Self::TxtNamesOtherTunnel {
                tunnel_id,
                tunnel_name,
            } => write!(f, "it claims the hostname for tunnel {tunnel_name:?} ({tunnel_id})"),
            Self::TxtNotManaged => f.write_str("its content is not a tunnel ownership record"),
            Self::RoutedByOtherTunnel { winner } => {
                write!(f, "the hostname is also routed by {winner}, which keeps the record")
            }
            Self::OtherCluster { cluster } => {
                write!(f, "its TXT says cluster {cluster:?} owns it")
            }
        }
    }
}

/// A routed hostname that gets no record because a record that is not ours is in the way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsConflict {
    pub tunnel: TunnelIdentity,
    pub hostname: String,
    /// The record in the way (or, for [`ConflictReason::RoutedByOtherTunnel`], the record the
    /// other tunnel keeps).
    pub record: RecordRef,
    pub reason: ConflictReason,
}

impl fmt::Display for DnsConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            ConflictReason::RoutedByOtherTunnel { .. } => write!(
                f,
                "DNS record {} for {}: {}; route the hostname through one tunnel only",
                self.record, self.hostname, self.reason
            ),
            reason if reason.is_other_cluster() => write!(
                f,
                "DNS record {} for {} is held by another cluster ({reason}); it stays with that \
                 cluster, and {} takes it over at its next DNS check once the other cluster lets \
                 go of the hostname",
                self.record, self.hostname, self.tunnel
            ),
            _ => write!(
                f,
                "DNS record {} is not managed by {}: {}; delete or rename it, or run cftunnel \
                 with --overwrite-unmanaged-dns",
                self.record, self.tunnel, self.reason
            ),
        }
    }
}

/// A hostname that cannot have a record in this zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidHostname {
    pub tunnel: TunnelIdentity,
    pub hostname: String,
    pub problem: String,
}

impl fmt::Display for InvalidHostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no DNS record for {:?}: {}", self.hostname, self.problem)
    }
}

/// A hostname another cluster's record points at one of this zone's tunnels while no tunnel
/// here routes it: that cluster shares the tunnel, and its visitors' requests may reach this
/// cluster's connectors, whose rules do not know the hostname (Cloudflare picks a nearby
/// connector of the tunnel, with no steering by hostname).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SharedHostname {
    pub tunnel: TunnelIdentity,
    pub hostname: String,
    /// The cluster its record's marker names.
    pub cluster: String,
}

/// The planner's answer for one zone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsPlan {
    pub changes: Vec<DnsChange>,
    pub conflicts: Vec<DnsConflict>,
    pub invalid: Vec<InvalidHostname>,
    /// Hostnames other clusters route through this zone's tunnels, which this cluster does not.
    pub shared: Vec<SharedHostname>,
}
