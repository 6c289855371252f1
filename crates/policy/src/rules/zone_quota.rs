//! One object routing more hostnames than a Free zone holds (docs/design.md §2.2, §3.3): a
//! warning at admission and in `cftunnel validate`. Neither knows the account's zones, their
//! plans or the records they hold, nor whether cftunnel runs with `--no-dns-txt-records`: the
//! warning says what one object alone asks of one Free zone. The DNS sync, which counts the
//! zone, reports the routes it leaves without records (`QuotaExceeded`).
use std::fmt;

use cftunnel_cloudflare::FREE_PLAN_RECORD_QUOTA;

use super::verdict::Verdict;

/// Hostnames a Free zone holds with cftunnel's `_managed` TXT records (two records each).
pub const FREE_ZONE_HOSTNAMES_WITH_TXT: usize = FREE_PLAN_RECORD_QUOTA / 2;

/// Warns when `hostnames` (distinct, each written into DNS) would not fit one Free zone.
pub(crate) fn check_hostname_count(field: impl fmt::Display, hostnames: usize, v: &mut Verdict) {
    if let Some(advice) = beyond_a_free_zone(hostnames) {
        v.warn(
            field,
            format!("{hostnames} hostnames get DNS records: {advice}"),
        );
    }
}

/// What a Free zone holds and what to do, when `hostnames` would not fit one.
pub(crate) fn beyond_a_free_zone(hostnames: usize) -> Option<String> {
    if hostnames <= FREE_ZONE_HOSTNAMES_WITH_TXT {
        return None;
    }
    let fit = if hostnames <= FREE_PLAN_RECORD_QUOTA {
        "only with --no-dns-txt-records"
    } else {
        "not even with --no-dns-txt-records"
    };
    Some(format!(
        "a Cloudflare zone on the Free plan is reported to hold {FREE_PLAN_RECORD_QUOTA} \
         records, {FREE_ZONE_HOSTNAMES_WITH_TXT} hostnames with cftunnel's _managed TXT records \
         (two records each) or {FREE_PLAN_RECORD_QUOTA} with --no-dns-txt-records, others' \
         records included; these fit one Free zone {fit}. In a full zone the youngest routes get \
         no record (QuotaExceeded); split them over zones, or use a paid plan (3,500 records \
         reported)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warned(hostnames: usize) -> Vec<String> {
        let mut v = Verdict::default();
        check_hostname_count("subjects", hostnames, &mut v);
        v.warnings
    }

    #[test]
    fn one_object_is_warned_past_what_one_free_zone_holds() {
        assert!(warned(100).is_empty());
        let over_txt = warned(101);
        assert_eq!(over_txt.len(), 1);
        assert!(
            over_txt[0].starts_with("subjects: 101 hostnames get DNS records: a Cloudflare zone on the Free plan is reported to hold 200 records, 100 hostnames with cftunnel's _managed TXT records"),
            "{over_txt:?}"
        );
        assert!(
            over_txt[0].contains("fit one Free zone only with --no-dns-txt-records"),
            "{over_txt:?}"
        );
        assert!(
            warned(201)[0].contains("not even with --no-dns-txt-records"),
            "{:?}",
            warned(201)
        );
    }
}
