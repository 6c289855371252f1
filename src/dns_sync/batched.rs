//! Batched writes: a zone's changes go out in as few batch requests as the plan's limit allows.
//!
//! - A hostname's changes (its CNAME and its `_managed` TXT) always travel in one batch, which
//!   Cloudflare applies in one transaction: a CNAME of ours never exists without its TXT.
//! - A TXT whose `DnsId` is the id of a CNAME created in the same batch is posted with an empty
//!   `DnsId`; once the batches are done the zone is planned again from the answers and those TXTs
//!   are patched, in batches too (the TXT is ours by its comment meanwhile). When the group's
//!   next sync is already on its way (routes still arriving), the patches are left to it: it
//!   starts from this sync's records, plans them with its own changes and sends them in its
//!   first batch, one request fewer per sync (docs/design.md §3.12).
//! - A batch of several hostnames refused with "record exists" or "not found" is, once per
//!   sync, followed by one read of the zone's candidates and a new plan of those hostnames,
//!   sent again: the usual cause is a batch whose answer was lost and that was applied after
//!   all (the client's retry then finds its own records), and a re-read costs a page or two
//!   where halving would cost a request per level for every hostname.
//! - A batch refused as a whole (4xx) is split in halves and each half sent again, down to one
//!   hostname, whose refusal is reported on its route; "record exists" / "not found" for one
//!   hostname re-reads its names and plans it once more, as single writes do.
//! - 403, 405, or a 404 that is not "record does not exist": the batch call is unavailable
//!   (older API, or a token that may not use it). In `auto` mode the sync falls back to
//!   single-record writes, remembers that for the zone and logs it once; in `always` mode that
//!   is an error like any other.
use std::collections::{BTreeSet, HashSet};

use cftunnel_cloudflare::{
    BatchDelete, BatchUpdate, CloudflareError, DnsBatch, DnsBatchResult, DnsRecord,
    FREE_PLAN_BATCH_LIMIT, ZonePlanLimit,
};

use crate::dns_sync::zone::{Run, record_name};
use cftunnel_policy::dns::plan_zone;
use cftunnel_policy::dns::{BatchMode, Ours, ZoneBatching};
use cftunnel_policy::dns::{DnsAction, DnsChange};

/// Where a change's answer is in the batch result.
#[derive(Clone, Copy)]
enum Slot {
    Delete,
    Patch(usize),
    Put(usize),
    Post(usize),
}

impl Run<'_> {
    /// Records per batch for this sync's zone, or `None` for single-record writes. The plan is
    /// read once per zone (a zone read) and remembered in the options' memory.
    pub(super) async fn batch_limit(&mut self) -> Option<usize> {
        let zone_id = self.reader.zone_id;
        let memory = &self.options.batch_memory;
        match (self.options.batch, memory.get(zone_id)) {
            (BatchMode::Never, _) | (BatchMode::Auto, Some(ZoneBatching::Unavailable)) => {
                return None;
            }
            (_, Some(ZoneBatching::Limit(limit))) => return Some(limit),
            _ => {}
        }
        let limit = match self.read_plan().await {
            Ok(zone) => ZonePlanLimit::of(&zone),
            Err(error) => {
                tracing::debug!(zone_id, %error, "zone plan unreadable; batches use the Free plan's limit");
                FREE_PLAN_BATCH_LIMIT
            }
        };
        memory.set(zone_id, ZoneBatching::Limit(limit));
        Some(limit)
    }

    /// Every hostname's changes in batches of at most `limit` records (those beyond a reported
    /// quota last, in batches of their own), then the `DnsId` patches. The batches within the
    /// quota go oldest and newest in turn (`oldest_and_newest_in_turn`).
    ///
    /// A batch of creates is sent when the pacer lets it go, not when the sync planned it: once
    /// half of its batches of creates went (two at least: its oldest and its newest), the sync
    /// takes each next batch's turn first, and if the DNS task's input changed meanwhile it
    /// gives the turn back and leaves the rest of its creates to the group's next sync, which
    /// starts at once from this sync's records and plans them with everything that arrived
    /// (docs/design.md §3.12). Deletions and updates always go. Half, not two: a sync that sent
    /// only its oldest and its newest batch before the next took over served a stream of routes
    /// newest first, and a route that fell out of the newest batch (a hundred newer ones arrived
    /// behind it) waited for the oldest end to reach it: 77 s for a new tunnel's records at
    /// 1,000 × 10 while routes were still being created.
    pub(super) async fn apply_batched(
        &mut self,
        send: Vec<Vec<DnsChange>>,
        beyond: Vec<Vec<DnsChange>>,
        limit: usize,
    ) {
        let mut batches = chunks(send, limit);
        // What adds no record (deletions make room in a zone at its quota) keeps its place.
        let rooms = batches
            .iter()
            .take_while(|b| b.iter().flatten().any(|c| !adds(c)))
            .count();
        let creates = oldest_and_newest_in_turn(batches.split_off(rooms));
        for chunk in batches {
            self.send(chunk, true).await;
        }
        // Half of what it planned (at least two batches) goes whatever arrives meanwhile: the
        // oldest quarter and the newest quarter of its creates.
        let must_send = ALWAYS_SENT.max(creates.len().div_ceil(2));
        let mut creates = creates.into_iter().enumerate();
        while let Some((sent, chunk)) = creates.next() {
            if sent >= must_send && self.newer_input_at_turn().await {
                self.left_to_next = chunk.len() + creates.map(|(_, c)| c.len()).sum::<usize>();
                self.left_to_next += beyond.len();
                tracing::debug!(
                    zone_id = self.reader.zone_id,
                    hostnames = self.left_to_next,
                    "creates left to the next sync, planned with the newer input"
                );
                self.defer_dns_ids();
                return;
            }
            self.send(chunk, true).await;
        }
        self.quota.probing = !beyond.is_empty();
        for chunk in chunks(beyond, limit) {
            self.send(chunk, true).await;
        }
        self.quota.probing = false;
        if self.pending_dns_ids.is_empty() {
            return;
        }
        if (self.more_coming)() {
            // The group's next sync is on its way: it plans these patches with its own
            // changes and sends them in its first batch, instead of a batch of patches here.
            self.defer_dns_ids();
            return;
        }
        let pending = std::mem::take(&mut self.pending_dns_ids);
        let plan = plan_zone(self.zone, &self.mirror, self.options);
        let fixes: Vec<DnsChange> = plan
            .changes
            .into_iter()
            .filter(|c| pending.contains(&c.hostname))
            .collect();
        for chunk in chunks(crate::dns_sync::zone::group_by_hostname(fixes), limit) {
            self.send(chunk, false).await;
        }
        self.pending_dns_ids.clear();
    }

    /// Takes the next batch's turn at the pacer; true when the DNS task's input changed by then
    /// (the turn is given back: its token returns to the bucket).
    async fn newer_input_at_turn(&mut self) -> bool {
        if self.batch_off {
            return false;
        }
        let (turn, _) = self.reader.client.take_turn().await;
        if (self.more_coming)() {
            return true;
        }
        self.turn = Some(turn);
        false
    }

    /// Leaves the pending `DnsId` patches to the group's next sync.
    fn defer_dns_ids(&mut self) {
        self.deferred_dns_ids = self.pending_dns_ids.len();
        self.pending_dns_ids.clear();
        if self.deferred_dns_ids > 0 {
            tracing::debug!(
                zone_id = self.reader.zone_id,
                patches = self.deferred_dns_ids,
                "DnsId patches left to the next sync"
            );
        }
    }

    /// Sends one batch of whole hostnames; narrows a refusal down to the hostname refused.
    async fn send(&mut self, groups: Vec<Vec<DnsChange>>, may_replan: bool) {
        let groups: Vec<Vec<DnsChange>> =
            groups.into_iter().filter(|g| !self.held_back(g)).collect();
        if groups.is_empty() {
            return;
        }
        if self.batch_off {
            for group in groups {
                self.apply_group(group, may_replan).await;
            }
            return;
        }
        let (batch, slots) = build(&groups);
        if batch.is_empty() {
            return;
        }
        self.writes += 1;
        let answer = match self.turn.take() {
            Some(turn) => turn.batch_dns_records(self.reader.zone_id, &batch).await,
            None => {
                self.reader
                    .client
                    .batch_dns_records(self.reader.zone_id, &batch)
                    .await
            }
        };
        let error = match answer {
            Ok(result) => {
                self.absorb(&groups, &slots, &result);
                if self.quota.probing {
                    self.accepted_beyond();
                }
                return;
            }
            Err(error) => error,
        };
        if is_unavailable(&error) && self.options.batch == BatchMode::Auto {
            tracing::warn!(
                zone_id = self.reader.zone_id,
                %error,
                "the DNS batch call is unavailable for this zone; writing one record per request from now on"
            );
            self.options
                .batch_memory
                .set(self.reader.zone_id, ZoneBatching::Unavailable);
            self.batch_off = true;
            return Box::pin(self.send(groups, may_replan)).await;
        }
        if groups.len() > 1
            && may_replan
            && !self.reread
            && (error.is_record_exists() || error.is_not_found())
        {
            self.reread = true;
            return Box::pin(self.replan_all(groups)).await;
        }
        // The zone is full: one hostname refused stays without records (a batch of several is
        // halved below, so those that fit land), as do hostnames tried beyond a reported quota.
        if error.is_quota_exceeded() && (groups.len() == 1 || self.quota.probing) {
            return self.refused_for_quota(&groups).await;
        }
        if groups.len() > 1 && is_refusal(&error) {
            let mut first = groups;
            let second = first.split_off(first.len() / 2);
            Box::pin(self.send(first, may_replan)).await;
            return Box::pin(self.send(second, may_replan)).await;
        }
        if groups.len() == 1 && may_replan && (error.is_record_exists() || error.is_not_found()) {
            return self.replan_batched(&groups[0]).await;
        }
        let copies: Vec<CloudflareError> = (1..groups.len()).map(|_| duplicate(&error)).collect();
        for (group, error) in groups.iter().zip(std::iter::once(error).chain(copies)) {
            self.report_failed(group, error);
        }
    }

    /// Reads the zone's candidates again and sends the hostnames of a refused batch as the new
    /// plan wants them (their writes may have been applied already, their answers lost).
    async fn replan_all(&mut self, groups: Vec<Vec<DnsChange>>) {
        let ours = Ours::new(&self.zone.tunnels, self.options.cluster_id.as_ref());
        let hostnames = crate::dns_sync::zone::routed_hostnames(self.zone);
        match self.reader.candidates(ours.targets(), &hostnames).await {
            Ok(fresh) => self.mirror = fresh,
            Err(error) => {
                let copies: Vec<CloudflareError> =
                    (0..groups.len()).map(|_| duplicate(&error)).collect();
                for (group, error) in groups.iter().zip(copies) {
                    self.report_failed(group, error);
                }
                return;
            }
        }
        let refused: BTreeSet<String> = groups
            .iter()
            .filter_map(|g| g.first().map(|c| c.hostname.clone()))
            .collect();
        let mut changes = Vec::new();
        for hostname in &refused {
            changes.extend(self.replanned(hostname));
        }
        let again = crate::dns_sync::zone::group_by_hostname(changes);
        if !again.is_empty() {
            Box::pin(self.send(again, true)).await;
        }
    }

    /// Re-reads every name of a refused hostname, plans it again, and sends its new changes once.
    async fn replan_batched(&mut self, group: &[DnsChange]) {
        let names: BTreeSet<String> = group.iter().map(|c| record_name(&c.action)).collect();
        for name in names {
            match self.reader.at_name(&name).await {
                Ok(fresh) => self.mirror_replace(&name, fresh),
                Err(read_error) => return self.report_failed(group, read_error),
            }
        }
        let Some(hostname) = group.first().map(|c| c.hostname.clone()) else {
            return;
        };
        let changes = self.replanned(&hostname);
        if !changes.is_empty() {
            Box::pin(self.send(vec![changes], false)).await;
        }
    }

    /// Takes a batch's answer into the mirror and the reports. The mirror is updated once per
    /// batch, not once per record: a first sync writes thousands of records into a zone whose
    /// mirror holds thousands, and a scan of the mirror per record made that quadratic.
    fn absorb(&mut self, groups: &[Vec<DnsChange>], slots: &[Vec<Slot>], result: &DnsBatchResult) {
        // Ids the batch deleted or answered, and the answers in order (the last answer of an id
        // stands, as a record at a time would leave it).
        let mut gone: HashSet<&str> = HashSet::new();
        let mut answers: Vec<&DnsRecord> = Vec::new();
        for (group, slots) in groups.iter().zip(slots) {
            for (change, slot) in group.iter().zip(slots) {
                let answered = match *slot {
                    Slot::Delete => None,
                    Slot::Patch(i) => result.patches.get(i),
                    Slot::Put(i) => result.puts.get(i),
                    Slot::Post(i) => result.posts.get(i),
                };
                match (&change.action, answered) {
                    (DnsAction::Delete { current, .. }, _) => {
                        let id = current.id.as_deref().unwrap_or_default();
                        gone.insert(id);
                        answers.retain(|r| r.id != id);
                    }
                    (_, Some(record)) => {
                        gone.insert(&record.id);
                        answers.retain(|r| r.id != record.id);
                        answers.push(record);
                    }
                    (_, None) => {}
                }
                self.report_written(change, answered);
                if let DnsAction::Create(desired) | DnsAction::Update { desired, .. } =
                    &change.action
                    && desired.waits_for_cname_id()
                {
                    self.pending_dns_ids.insert(change.hostname.clone());
                }
            }
        }
        if !gone.is_empty() {
            self.mirror.retain(|r| !gone.contains(r.id.as_str()));
        }
        self.mirror.extend(answers.into_iter().cloned());
    }
}

/// Batches of creates a sync sends at least before it may leave the rest to a newer input's
/// sync (when it planned more than four, it sends half).
const ALWAYS_SENT: usize = 2;

/// Does `change` add a record?
fn adds(change: &DnsChange) -> bool {
    matches!(change.action, DnsAction::Create(_))
}

/// Batches of creates (in the order `fit` gave them: by the age of their hostname's oldest
/// route) sent the oldest, the newest, the second oldest, the second newest, …: as the pacer
/// serves a lane's oldest and newest work in turn (docs/design.md §3.8), a first sync's backlog
/// drains in order at half the sync's batches or more, and the routes of a tunnel a user just
/// created wait a batch or two instead of the whole backlog.
fn oldest_and_newest_in_turn<T>(chunks: Vec<T>) -> Vec<T> {
    let mut ordered = Vec::with_capacity(chunks.len());
    let mut rest: std::collections::VecDeque<T> = chunks.into();
    while let Some(oldest) = rest.pop_front() {
        ordered.push(oldest);
        if let Some(newest) = rest.pop_back() {
            ordered.push(newest);
        }
    }
    ordered
}

/// Whole hostnames packed into batches of at most `limit` records, in plan order.
fn chunks(groups: Vec<Vec<DnsChange>>, limit: usize) -> Vec<Vec<Vec<DnsChange>>> {
    let limit = limit.max(1);
    let mut out: Vec<Vec<Vec<DnsChange>>> = Vec::new();
    let mut current: Vec<Vec<DnsChange>> = Vec::new();
    let mut size = 0;
    for group in groups {
        if size + group.len() > limit && !current.is_empty() {
            out.push(std::mem::take(&mut current));
            size = 0;
        }
        size += group.len();
        current.push(group);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The batch body for these hostnames' changes, and where each change's answer will be.
fn build(groups: &[Vec<DnsChange>]) -> (DnsBatch, Vec<Vec<Slot>>) {
    let mut batch = DnsBatch::default();
    let slots: Vec<Vec<Slot>> = groups
        .iter()
        .map(|group| {
            group
                .iter()
                .map(|change| match &change.action {
                    DnsAction::Delete { current, .. } => {
                        batch.deletes.push(BatchDelete {
                            id: current.id.clone().unwrap_or_default(),
                        });
                        Slot::Delete
                    }
                    DnsAction::Update {
                        current,
                        desired,
                        take_over,
                    } => {
                        let update = BatchUpdate {
                            id: current.id.clone().unwrap_or_default(),
                            record: desired.body_in_batch(),
                        };
                        if *take_over {
                            batch.puts.push(update);
                            Slot::Put(batch.puts.len() - 1)
                        } else {
                            batch.patches.push(update);
                            Slot::Patch(batch.patches.len() - 1)
                        }
                    }
                    DnsAction::Create(desired) => {
                        batch.posts.push(desired.body_in_batch());
                        Slot::Post(batch.posts.len() - 1)
                    }
                })
                .collect()
        })
        .collect();
    (batch, slots)
}

/// The batch call does not exist here, or this token may not use it.
fn is_unavailable(error: &CloudflareError) -> bool {
    match error.status() {
        Some(403 | 405) => true,
        Some(404) => !error.is_record_exists() && !error.has_code(CODE_RECORD_NOT_FOUND),
        _ => false,
    }
}

/// Cloudflare refused the batch as a whole for something in it (not rate limiting).
fn is_refusal(error: &CloudflareError) -> bool {
    matches!(
        error,
        CloudflareError::Api {
            status: 400..=499,
            ..
        }
    ) && error.status() != Some(429)
}

/// "Record does not exist."
const CODE_RECORD_NOT_FOUND: u32 = 81044;

/// The same failure, for another hostname of a batch that failed as a whole.
fn duplicate(error: &CloudflareError) -> CloudflareError {
    match error {
        CloudflareError::Api {
            operation,
            status,
            errors,
        } => CloudflareError::Api {
            operation,
            status: *status,
            errors: errors.clone(),
        },
        CloudflareError::RateLimited {
            operation,
            retry_after,
        } => CloudflareError::RateLimited {
            operation,
            retry_after: *retry_after,
        },
        CloudflareError::Timeout { operation, after } => CloudflareError::Timeout {
            operation,
            after: *after,
        },
        CloudflareError::Decode {
            operation,
            status,
            detail,
        } => CloudflareError::Decode {
            operation,
            status: *status,
            detail: detail.clone(),
        },
        // Transport failures carry a source that cannot be cloned: the text is kept.
        other => CloudflareError::InvalidInput(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::oldest_and_newest_in_turn;

    #[test]
    fn batches_go_oldest_and_newest_in_turn() {
        assert_eq!(
            oldest_and_newest_in_turn(vec![1, 2, 3, 4, 5]),
            [1, 5, 2, 4, 3]
        );
        assert_eq!(oldest_and_newest_in_turn(vec![1, 2]), [1, 2]);
        assert_eq!(
            oldest_and_newest_in_turn(Vec::<u8>::new()),
            Vec::<u8>::new()
        );
    }
}
