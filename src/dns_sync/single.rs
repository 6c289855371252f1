//! Single-record writes: one request per record, one hostname at a time (`--dns-batch=never`,
//! and the fallback where the batch call is unavailable).
use cftunnel_cloudflare::DnsRecord;

use crate::dns_sync::zone::{Failure, Run, body_of, record_name};
use cftunnel_policy::dns::{DesiredRecord, DnsAction, DnsChange, RecordRef};

impl Run<'_> {
    /// Applies one hostname's changes in order; on a changed name, re-plans it once.
    pub(super) async fn apply_group(&mut self, group: Vec<DnsChange>, may_replan: bool) {
        if self.held_back(&group) {
            return;
        }
        let mut created_cname: Option<String> = None;
        for (done, change) in group.iter().enumerate() {
            let error = match self.apply(&change.action, created_cname.as_deref()).await {
                Ok(record) => {
                    if let (DnsAction::Create(DesiredRecord::Cname { .. }), Some(r)) =
                        (&change.action, &record)
                    {
                        created_cname = Some(r.id.clone());
                    }
                    self.report_written(change, record.as_ref());
                    continue;
                }
                Err(Failure::NameChanged(_)) if may_replan => {
                    let name = record_name(&change.action);
                    match self.reader.at_name(&name).await {
                        Ok(fresh) => {
                            self.mirror_replace(&name, fresh);
                            let group = self.replanned(&change.hostname);
                            return Box::pin(self.apply_group(group, false)).await;
                        }
                        Err(read_error) => read_error,
                    }
                }
                Err(Failure::NameChanged(error) | Failure::Failed(error)) => error,
            };
            let quota = error.is_quota_exceeded();
            if !quota {
                self.report_failed(&group[done..], error);
            }
            if let Some(cname) = created_cname.as_deref() {
                self.roll_back_cname(&group, cname).await;
            }
            if quota {
                // The zone is full (counted once the CNAME created for it went again).
                self.refused_for_quota(std::slice::from_ref(&group)).await;
            }
            return;
        }
        if self.quota.probing {
            self.accepted_beyond();
        }
    }

    /// The CNAME this group created goes again when a later change of the group (its TXT)
    /// failed: no CNAME is left without the TXT that goes with it. The next sync plans the
    /// hostname anew. A failed removal is reported with the group's failure.
    async fn roll_back_cname(&mut self, group: &[DnsChange], cname: &str) {
        let Some(created) = group
            .iter()
            .find(|c| matches!(c.action, DnsAction::Create(DesiredRecord::Cname { .. })))
        else {
            return;
        };
        let Some(record) = self.mirror.iter().find(|r| r.id == cname).cloned() else {
            return;
        };
        let undo = DnsChange {
            action: DnsAction::Delete {
                current: RecordRef::of(&record),
                take_over: false,
            },
            ..created.clone()
        };
        match self.apply(&undo.action, None).await {
            Ok(_) => self.report_written(&undo, None),
            Err(Failure::NameChanged(error) | Failure::Failed(error)) => {
                self.report_failed(std::slice::from_ref(&undo), error)
            }
        }
    }

    /// One API call; the answer updates the mirror. `Ok(None)` for a delete.
    pub(super) async fn apply(
        &mut self,
        action: &DnsAction,
        created_cname: Option<&str>,
    ) -> Result<Option<DnsRecord>, Failure> {
        let client = self.reader.client;
        let zone_id = self.reader.zone_id;
        match action {
            DnsAction::Create(desired) => {
                let body = body_of(desired, created_cname)?;
                self.writes += 1;
                match client.create_dns_record(zone_id, &body).await {
                    Ok(record) => {
                        self.mirror.push(record.clone());
                        Ok(Some(record))
                    }
                    Err(e) if e.is_record_exists() => Err(Failure::NameChanged(e)),
                    Err(e) => Err(Failure::Failed(e)),
                }
            }
            DnsAction::Update {
                current,
                desired,
                take_over,
            } => {
                let body = body_of(desired, created_cname)?;
                let id = current.id.as_deref().unwrap_or_default();
                self.writes += 1;
                let answer = if *take_over {
                    client.update_dns_record(zone_id, id, &body).await
                } else {
                    client.patch_dns_record(zone_id, id, &body).await
                };
                match answer {
                    Ok(record) => {
                        self.mirror.retain(|r| r.id != record.id);
                        self.mirror.push(record.clone());
                        Ok(Some(record))
                    }
                    Err(e) if e.is_not_found() => Err(Failure::NameChanged(e)),
                    Err(e) => Err(Failure::Failed(e)),
                }
            }
            DnsAction::Delete { current, .. } => {
                let id = current.id.as_deref().unwrap_or_default();
                self.writes += 1;
                match client.delete_dns_record(zone_id, id).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(Failure::Failed(e)),
                }
                self.mirror.retain(|r| r.id != id);
                Ok(None)
            }
        }
    }
}
