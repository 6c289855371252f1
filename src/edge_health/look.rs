//! One pass of the edge health task: every live tunnel object with a tunnel id, looked up in its
//! account's walk; its connectors listed when its word changed; its pods counted.
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::certificates::{Packs, in_zone};
use super::{EdgeReport, EdgeView};
use crate::caches::{ProcessCaches, TermCaches};
use crate::term::Context;
use crate::term::adapters::TunnelKindAdapter;
use crate::term::credentials;
use cftunnel_cloudflare::{CloudflareClient, Priority};
use cftunnel_policy::edge::{Observed, changes_word, edge_status, summary, word};
use cftunnel_policy::render::ObjectNames;
use cftunnel_policy::render::objects::controlled_by;
use cftunnel_types::{CloudflareDetails, ConnectorsStatus, EdgeStatus, TunnelIdentity};

/// Most connector lists a pass asks for. A word's change is what asks, and a first sync
/// changes a thousand words (`inactive` to `healthy`) within minutes: the rest wait for the
/// next passes, so health never spends more than this per `--edge-interval` on details.
pub(super) const LISTINGS_PER_PASS: usize = 4;

/// What the task remembers between passes: the edge status it last reported per uid, so a
/// word's change is noticed (and its connectors listed) once even while the write is pending,
/// and the uids whose connectors are still to be listed for their current word.
#[derive(Default)]
pub(super) struct Seen {
    edges: HashMap<String, EdgeStatus>,
    unlisted: HashSet<String>,
    /// The zones' certificate packs as last read.
    packs: Packs,
}

/// A tunnel object to look up.
struct Candidate {
    uid: String,
    identity: TunnelIdentity,
    /// Its zone (id, name) and the hostnames its routes serve there.
    zone: Option<(String, String)>,
    hostnames: Vec<String>,
    /// Where its API Secret and its cloudflared live.
    namespace: String,
    details: CloudflareDetails,
    account: String,
    tunnel_id: String,
    workload: String,
    recorded: Option<EdgeStatus>,
}

fn candidate<K: TunnelKindAdapter>(obj: &K, ctx: &Context) -> Option<Candidate> {
    if obj.meta().deletion_timestamp.is_some() {
        return None;
    }
    let status = obj.tunnel_status()?;
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let identity = obj.identity(&ctx.options);
    let zone = non_empty(&status.zone_id).zip(non_empty(&status.zone_domain));
    let hostnames = match &zone {
        Some((_, domain)) => in_zone(status.routes.as_deref().unwrap_or_default(), domain),
        None => Vec::new(),
    };
    Some(Candidate {
        uid: obj.uid()?,
        identity: obj.route_identity(),
        zone,
        hostnames,
        tunnel_id: non_empty(&status.tunnel_id)?,
        account: non_empty(&status.account_id)?,
        workload: ObjectNames::for_owner(&identity).workload,
        namespace: identity.namespace,
        details: obj.tunnel_spec().cloudflare,
        recorded: status.edge.clone(),
    })
}

/// A client for one API Secret, and its credential's fingerprint (which keys the walks).
struct Caller {
    cf: CloudflareClient,
    fingerprint: String,
}

/// An API Secret as tunnel objects name it: read once per pass.
type SecretKey = (String, String, String, String, Option<String>);

fn secret_key(c: &Candidate) -> SecretKey {
    let d = &c.details;
    (
        c.namespace.clone(),
        d.secret.clone(),
        d.api_token_key.clone(),
        d.api_key_key.clone(),
        d.email.clone(),
    )
}

/// Looks every tunnel up; `max_age`: the oldest walk that still answers.
pub(super) async fn pass(
    ctx: &Context,
    caches: &ProcessCaches,
    children: &TermCaches,
    seen: &mut Seen,
    max_age: Duration,
) -> EdgeView {
    let mut candidates: Vec<Candidate> = Vec::new();
    for tunnel in caches.tunnels.store().state() {
        candidates.extend(candidate(tunnel.as_ref(), ctx));
    }
    for tunnel in caches.cluster_tunnels.store().state() {
        candidates.extend(candidate(tunnel.as_ref(), ctx));
    }
    let now = jiff::Timestamp::now().to_string();
    let mut callers: HashMap<SecretKey, Option<Arc<Caller>>> = HashMap::new();
    let mut view = EdgeView::default();
    let mut next = Seen {
        packs: std::mem::take(&mut seen.packs),
        ..Seen::default()
    };
    let mut listings = LISTINGS_PER_PASS;
    let mut zones = BTreeSet::new();
    // Packs are read again at the drift interval (or every ten minutes without drift checks).
    let packs_age = match ctx.options.drift_interval {
        d if d.is_zero() => Duration::from_secs(600),
        d => d,
    };
    for c in candidates {
        let key = secret_key(&c);
        let caller = match callers.get(&key) {
            Some(caller) => caller.clone(),
            None => {
                let caller = caller_for(ctx, &c).await;
                callers.insert(key, caller.clone());
                caller
            }
        };
        let previous = seen.edges.remove(&c.uid).or_else(|| c.recorded.clone());
        let observed = match &caller {
            Some(caller) => look(ctx, caller, &c, max_age).await,
            None => None,
        };
        // Not looked up (no credential, a failed walk, a tunnel the walk does not list yet):
        // what was known stays.
        let edge = match observed {
            Some(observed) => {
                // A tunnel down or never connected has no connector to list: a first look at a
                // thousand new tunnels costs no call each.
                let known = cftunnel_policy::edge::connectors_without_call(&observed);
                let wants = known.is_none()
                    && (seen.unlisted.contains(&c.uid)
                        || changes_word(previous.as_ref(), &observed));
                let listed = match (wants, &caller) {
                    (true, Some(caller)) if listings > 0 => {
                        listings -= 1;
                        connectors(caller, &c).await
                    }
                    _ => known,
                };
                if wants && listed.is_none() {
                    next.unlisted.insert(c.uid.clone());
                }
                Some(edge_status(previous.as_ref(), observed, listed, &now))
            }
            None => {
                if seen.unlisted.contains(&c.uid) {
                    next.unlisted.insert(c.uid.clone());
                }
                previous
            }
        };
        if let Some(edge) = &edge {
            next.edges.insert(c.uid.clone(), edge.clone());
        }
        let connectors = pods(children, &c);
        if let (Some(caller), Some((zone_id, zone_name))) = (&caller, &c.zone)
            && !c.hostnames.is_empty()
        {
            zones.insert(zone_id.clone());
            let found = next
                .packs
                .check(&caller.cf, zone_id, zone_name, &c.hostnames, packs_age)
                .await;
            if !found.is_empty() {
                view.certificates.insert(c.identity.clone(), found);
            }
        }
        view.tunnels.insert(c.uid, EdgeReport { edge, connectors });
    }
    next.packs.keep_only(&zones);
    *seen = next;
    view
}

async fn caller_for(ctx: &Context, c: &Candidate) -> Option<Arc<Caller>> {
    let secret = match credentials::read_api_secret(&ctx.client, &c.namespace, &c.details).await {
        Ok(secret) => secret,
        Err(error) => {
            tracing::debug!(namespace = %c.namespace, secret = %c.details.secret, %error, "edge health: no credential");
            return None;
        }
    };
    let fingerprint = secret.credentials.fingerprint();
    let cf = ctx
        .cloudflare
        .client_at(secret.credentials, Priority::Background)
        .ok()?;
    Some(Arc::new(Caller { cf, fingerprint }))
}

/// What the tunnel's account's walk says of it; `None` when the walk failed or does not list
/// it.
async fn look(
    ctx: &Context,
    caller: &Caller,
    c: &Candidate,
    max_age: Duration,
) -> Option<Observed> {
    let listed = ctx
        .cloudflare
        .tunnel_lists
        .live(&caller.cf, &caller.fingerprint, &c.account, max_age)
        .await;
    let facts = match listed {
        Ok(listed) => listed.get(&c.tunnel_id)?.clone(),
        Err(error) => {
            tracing::debug!(account = %c.account, %error, "edge health: the tunnel walk failed");
            return None;
        }
    };
    Some(Observed {
        status: word(facts.status),
        conns_active_at: facts.conns_active_at.map(|t| t.to_string()),
        conns_inactive_at: facts.conns_inactive_at.map(|t| t.to_string()),
    })
}

/// The summary of the tunnel's connectors (`…/connections`); `None` when the call failed.
async fn connectors(caller: &Caller, c: &Candidate) -> Option<cftunnel_types::EdgeConnectors> {
    match caller
        .cf
        .list_tunnel_connections(&c.account, &c.tunnel_id)
        .await
    {
        Ok(clients) => Some(summary(&clients)),
        Err(error) => {
            tracing::debug!(tunnel = %c.tunnel_id, %error, "edge health: connectors not listed");
            None
        }
    }
}

/// The tunnel's cloudflared pods ready and wanted, from its own Deployment.
fn pods(children: &TermCaches, c: &Candidate) -> Option<ConnectorsStatus> {
    let key = ObjectRef::new(&c.workload).within(&c.namespace);
    let workload = children
        .deployments
        .iter()
        .find_map(|deployments| deployments.store().get(&key))
        .filter(|w| controlled_by(&w.metadata, &c.uid))?;
    let (ready, desired) = workload.pods_ready();
    Some(ConnectorsStatus { ready, desired })
}
