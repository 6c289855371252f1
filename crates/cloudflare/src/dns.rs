//! DNS record operations.
use http::Method;

use super::engine::{Call, CloudflareClient};
use super::error::CloudflareError;
use super::models::Page;
use super::records::{DnsRecord, DnsRecordFilter, NewDnsRecord};

/// Page size used by the list walk (Cloudflare's own guidance for this list).
pub const MAX_DNS_PER_PAGE: u32 = 1000;

impl CloudflareClient {
    /// One page (1-based) of the records matching `filter`.
    pub async fn list_dns_records_page(
        &self,
        zone_id: &str,
        filter: &DnsRecordFilter,
        page: u32,
    ) -> Result<Page<DnsRecord>, CloudflareError> {
        let path = ["zones", zone_id, "dns_records"];
        let mut call = Call::get("dns.list", &path);
        call.query = filter.query();
        let call = call
            .query("page", page.max(1).to_string())
            .query("per_page", dns_page_size(filter).to_string());
        self.fetch_page(call).await
    }

    /// Every record matching `filter`, walking all pages.
    pub async fn list_dns_records(
        &self,
        zone_id: &str,
        filter: &DnsRecordFilter,
    ) -> Result<Vec<DnsRecord>, CloudflareError> {
        let path = ["zones", zone_id, "dns_records"];
        self.fetch_all("dns.list", &path, filter.query(), dns_page_size(filter))
            .await
    }

    /// One record.
    pub async fn get_dns_record(
        &self,
        zone_id: &str,
        record_id: &str,
    ) -> Result<DnsRecord, CloudflareError> {
        let path = ["zones", zone_id, "dns_records", record_id];
        self.fetch(Call::get("dns.get", &path)).await
    }

    /// Creates a record. Retried after timeouts and 5xx, so a lost answer can make the retry
    /// fail with 81053/81057 ("already exists"); the caller then finds and adopts the record.
    pub async fn create_dns_record(
        &self,
        zone_id: &str,
        record: &NewDnsRecord,
    ) -> Result<DnsRecord, CloudflareError> {
        self.write_record(
            "dns.create",
            Method::POST,
            &["zones", zone_id, "dns_records"],
            record,
        )
        .await
    }

    /// Overwrites a record (PUT): fields not sent fall back to their defaults.
    pub async fn update_dns_record(
        &self,
        zone_id: &str,
        record_id: &str,
        record: &NewDnsRecord,
    ) -> Result<DnsRecord, CloudflareError> {
        self.rewrite_record(Method::PUT, zone_id, record_id, record)
            .await
    }

    /// Patches a record (PATCH): fields not sent keep their value.
    pub async fn patch_dns_record(
        &self,
        zone_id: &str,
        record_id: &str,
        record: &NewDnsRecord,
    ) -> Result<DnsRecord, CloudflareError> {
        self.rewrite_record(Method::PATCH, zone_id, record_id, record)
            .await
    }

    /// PUT (`dns.update`) or PATCH (`dns.patch`) of one record.
    async fn rewrite_record(
        &self,
        method: Method,
        zone_id: &str,
        record_id: &str,
        record: &NewDnsRecord,
    ) -> Result<DnsRecord, CloudflareError> {
        let operation = if method == Method::PUT {
            "dns.update"
        } else {
            "dns.patch"
        };
        let path = ["zones", zone_id, "dns_records", record_id];
        self.write_record(operation, method, &path, record).await
    }

    /// Create, overwrite and patch send the same validated body; only method and path differ.
    async fn write_record(
        &self,
        operation: &'static str,
        method: Method,
        path: &[&str],
        record: &NewDnsRecord,
    ) -> Result<DnsRecord, CloudflareError> {
        record.validate()?;
        self.fetch(Call::with_json(operation, method, path, record)?)
            .await
    }

    /// Deletes a record (no body).
    pub async fn delete_dns_record(
        &self,
        zone_id: &str,
        record_id: &str,
    ) -> Result<(), CloudflareError> {
        let path = ["zones", zone_id, "dns_records", record_id];
        self.execute::<serde::de::IgnoredAny>(Call::delete("dns.delete", &path))
            .await?;
        Ok(())
    }
}

fn dns_page_size(filter: &DnsRecordFilter) -> u32 {
    filter
        .per_page
        .unwrap_or(MAX_DNS_PER_PAGE)
        .clamp(1, MAX_DNS_PER_PAGE)
}
