//! Reading a zone's candidate records: the only reads of a sync.
//!
//! TXT candidates: `type=TXT&name.startswith=_managed.`, every page.
//!
//! CNAME candidates ("content is one of our targets"): the 2024 OpenAPI subset documents only
//! exact `content`, so the choice is between one `type=CNAME&content=<target>` walk per target
//! (current and previous ids of every tunnel in the zone) and one walk over every CNAME of the
//! zone, filtered here. The sync reads page 1 of `type=CNAME` first: if the remaining pages are
//! no more than the targets, it walks them (the usual case: one page holds 1,000 records, so a
//! zone of 100 tunnels and 1,000 routes costs 1–2 reads, not 100+); otherwise (a zone full of
//! other CNAMEs) it queries each target by exact content. Cost: min(pages of all CNAMEs,
//! 1 + targets). The whole-zone walk also shows foreign CNAMEs at routed hostnames, so their
//! conflicts cost no failed create.
use std::borrow::Cow;
use std::collections::BTreeSet;

use cftunnel_cloudflare::{
    CloudflareClient, CloudflareError, DnsRecord, DnsRecordFilter, DnsRecordType, Page,
};

use cftunnel_policy::dns::TXT_PREFIX;
use cftunnel_policy::dns::normalized;

/// A list walk longer than this is a broken server, not a zone.
const MAX_PAGES: u32 = 10_000;
/// Page size of the call that counts a zone's records (only its `total_count` is read).
const COUNT_PAGE_SIZE: u32 = 5;

/// Counts the list calls of one sync.
pub(crate) struct Reader<'a> {
    pub client: &'a CloudflareClient,
    pub zone_id: &'a str,
    pub page_size: u32,
    pub reads: u32,
}

impl Reader<'_> {
    async fn page(
        &mut self,
        filter: &DnsRecordFilter,
        page: u32,
    ) -> Result<Page<DnsRecord>, CloudflareError> {
        self.reads += 1;
        self.client
            .list_dns_records_page(self.zone_id, filter, page)
            .await
    }

    fn filter(&self, record_type: Option<DnsRecordType>) -> DnsRecordFilter {
        DnsRecordFilter {
            record_type,
            per_page: Some(self.page_size),
            ..Default::default()
        }
    }

    /// The records of every page of `filter` that `keep` keeps (page by page: a walk over a
    /// zone's every CNAME holds only the wanted ones), starting after `first` when it was
    /// already read.
    async fn walk(
        &mut self,
        filter: &DnsRecordFilter,
        first: Option<Page<DnsRecord>>,
        keep: impl Fn(&DnsRecord) -> bool,
    ) -> Result<Vec<DnsRecord>, CloudflareError> {
        let mut all = Vec::new();
        let mut next = match first {
            Some(page) => {
                let done = is_last(&page, 1, self.page_size);
                all.extend(page.items.into_iter().filter(&keep));
                if done {
                    return Ok(all);
                }
                2
            }
            None => 1,
        };
        while next <= MAX_PAGES {
            let page = self.page(filter, next).await?;
            let done = is_last(&page, next, self.page_size);
            all.extend(page.items.into_iter().filter(&keep));
            if done {
                return Ok(all);
            }
            next += 1;
        }
        Err(CloudflareError::Decode {
            operation: "dns.list",
            status: 200,
            detail: format!("pagination did not end after {MAX_PAGES} pages"),
        })
    }

    /// The candidates of a zone whose tunnels point at `targets` and route `hostnames`.
    pub async fn candidates(
        &mut self,
        targets: &BTreeSet<String>,
        hostnames: &BTreeSet<Cow<'_, str>>,
    ) -> Result<Vec<DnsRecord>, CloudflareError> {
        let mut found = if targets.is_empty() {
            Vec::new()
        } else {
            self.cnames(targets, hostnames).await?
        };
        let mut txt = self.filter(Some(DnsRecordType::Txt));
        txt.name_startswith = Some(TXT_PREFIX.to_string());
        found.extend(self.walk(&txt, None, |_| true).await?);
        // By id, each once (walks by content may meet a record twice): sorted in place, as a
        // map keyed by a copy of every id would hold a zone's records twice over.
        found.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        found.dedup_by(|a, b| a.id == b.id);
        Ok(found)
    }

    async fn cnames(
        &mut self,
        targets: &BTreeSet<String>,
        hostnames: &BTreeSet<Cow<'_, str>>,
    ) -> Result<Vec<DnsRecord>, CloudflareError> {
        let all = self.filter(Some(DnsRecordType::Cname));
        let first = self.page(&all, 1).await?;
        let remaining = pages_after_first(&first, self.page_size);
        if remaining.is_some_and(|r| r <= targets.len() as u64) {
            let wanted = |r: &DnsRecord| {
                targets.contains(normalized(&r.content).as_ref())
                    || hostnames.contains(normalized(&r.name).as_ref())
            };
            return self.walk(&all, Some(first), wanted).await;
        }
        let mut records = Vec::new();
        for target in targets {
            let mut by_content = self.filter(Some(DnsRecordType::Cname));
            by_content.content = Some(target.clone());
            records.extend(self.walk(&by_content, None, |_| true).await?);
        }
        Ok(records)
    }

    /// How many records the zone holds, of every type (all count toward its record quota):
    /// one list call of the smallest page, read for its `total_count`; `None` when the answer
    /// does not say.
    pub(crate) async fn count_all(&mut self) -> Result<Option<usize>, CloudflareError> {
        let filter = DnsRecordFilter {
            per_page: Some(COUNT_PAGE_SIZE),
            ..Default::default()
        };
        let page = self.page(&filter, 1).await?;
        Ok(page.info.map(|info| info.total_count as usize))
    }

    /// Every record at `name` (any type): the re-read after a create found the name taken.
    pub(crate) async fn at_name(&mut self, name: &str) -> Result<Vec<DnsRecord>, CloudflareError> {
        let mut filter = self.filter(None);
        filter.name = Some(name.to_string());
        self.walk(&filter, None, |_| true).await
    }
}

/// A short or empty page ends a walk, as does reaching `total_pages`.
fn is_last(page: &Page<DnsRecord>, number: u32, page_size: u32) -> bool {
    let received = page.items.len();
    received == 0
        || received < page_size as usize
        || page
            .info
            .and_then(|i| i.total_pages)
            .is_some_and(|total| number >= total)
}

/// Pages still to read after page 1; `None` when the answer does not say.
fn pages_after_first(first: &Page<DnsRecord>, page_size: u32) -> Option<u64> {
    if is_last(first, 1, page_size) {
        return Some(0);
    }
    let info = first.info?;
    let total = match info.total_pages {
        Some(total) => u64::from(total),
        None if info.total_count > 0 => u64::from(info.total_count).div_ceil(u64::from(page_size)),
        None => return None,
    };
    Some(total.saturating_sub(1))
}
