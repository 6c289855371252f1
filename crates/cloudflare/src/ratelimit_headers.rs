//! The `Ratelimit` and `Ratelimit-Policy` headers (the IETF draft's structured fields, as
//! Cloudflare sends them: `Ratelimit: "default";r=50;t=30`, `Ratelimit-Policy:
//! "default";q=1200;w=300`). `r` is what is left, `t` the seconds until more is, `q` the
//! requests of the policy's window of `w` seconds; of several items, the tightest counts.
//! Anything unreadable is ignored; `t` is capped at [`MAX_RETRY_AFTER`] like `Retry-After`.
use std::time::Duration;

use http::HeaderMap;

use crate::retry::MAX_RETRY_AFTER;

/// What is left of the budget: `remaining` calls for `reset` (`Ratelimit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Remaining {
    pub remaining: u32,
    pub reset: Duration,
}

/// The server's budget (`Ratelimit-Policy`): `requests` in any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub requests: u32,
    pub window: Duration,
}

/// The tightest of the header's items: the fewest calls left.
pub(crate) fn remaining(headers: &HeaderMap) -> Option<Remaining> {
    let value = headers.get("ratelimit")?.to_str().ok()?;
    value
        .split(',')
        .filter_map(|item| {
            Some(Remaining {
                remaining: u32::try_from(parameter(item, "r")?).unwrap_or(u32::MAX),
                // Capped as `Retry-After` is: one bad header cannot stall a credential.
                reset: Duration::from_secs(parameter(item, "t")?).min(MAX_RETRY_AFTER),
            })
        })
        .min_by_key(|r| r.remaining)
}

/// The slowest of the header's policies (a burst policy and a longer one may both be listed).
pub(crate) fn policy(headers: &HeaderMap) -> Option<Policy> {
    let value = headers.get("ratelimit-policy")?.to_str().ok()?;
    value
        .split(',')
        .filter_map(|item| {
            let q = parameter(item, "q").filter(|q| *q > 0)?;
            let w = parameter(item, "w").filter(|w| *w > 0)?;
            Some(Policy {
                requests: u32::try_from(q).unwrap_or(u32::MAX),
                window: Duration::from_secs(w),
            })
        })
        .min_by(|a, b| {
            // a per second below b's: q_a / w_a < q_b / w_b.
            (u128::from(a.requests) * b.window.as_nanos())
                .cmp(&(u128::from(b.requests) * a.window.as_nanos()))
        })
}

/// The integer parameter `key` of one structured-field list item.
fn parameter(item: &str, key: &str) -> Option<u64> {
    item.split(';')
        .skip(1)
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
        .and_then(|(_, v)| v.trim().parse::<u64>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().expect("header value"));
        }
        map
    }

    #[test]
    fn both_headers_are_read_as_cloudflare_sends_them() {
        let h = headers(&[
            ("ratelimit", "\"default\";r=50;t=30"),
            ("ratelimit-policy", "\"burst\";q=100;w=60"),
        ]);
        assert_eq!(
            remaining(&h),
            Some(Remaining {
                remaining: 50,
                reset: Duration::from_secs(30)
            })
        );
        assert_eq!(
            policy(&h),
            Some(Policy {
                requests: 100,
                window: Duration::from_secs(60)
            })
        );
    }

    #[test]
    fn unreadable_headers_are_ignored() {
        for bad in [
            "",
            "\"default\"",
            "\"default\";r=x;t=1",
            "r=1",
            "\"d\";r=-1;t=2",
        ] {
            let h = headers(&[("ratelimit", bad), ("ratelimit-policy", bad)]);
            assert_eq!(remaining(&h), None, "{bad}");
            assert_eq!(policy(&h), None, "{bad}");
        }
        let zero = headers(&[("ratelimit-policy", "\"default\";q=0;w=300")]);
        assert_eq!(policy(&zero), None);
    }

    #[test]
    fn of_several_items_the_tightest_counts() {
        let h = headers(&[
            ("ratelimit", "\"default\";r=900;t=200, \"burst\";r=4;t=20"),
            (
                "ratelimit-policy",
                "\"default\";q=1200;w=300, \"burst\";q=100;w=60",
            ),
        ]);
        assert_eq!(remaining(&h).map(|r| r.remaining), Some(4));
        assert_eq!(
            policy(&h),
            Some(Policy {
                requests: 100,
                window: Duration::from_secs(60)
            })
        );
        let slower_second = headers(&[(
            "ratelimit-policy",
            "\"burst\";q=100;w=60, \"default\";q=60;w=300",
        )]);
        assert_eq!(policy(&slower_second).map(|p| p.requests), Some(60));
    }

    #[test]
    fn a_reset_is_capped_like_retry_after() {
        for t in ["86400", "18446744073709551615"] {
            let h = headers(&[("ratelimit", &format!("\"default\";r=0;t={t}"))]);
            let left = remaining(&h).expect("read");
            assert_eq!(left.reset, MAX_RETRY_AFTER);
        }
        let h = headers(&[("ratelimit", "\"default\";r=0;t=30")]);
        assert_eq!(
            remaining(&h).map(|r| r.reset),
            Some(Duration::from_secs(30))
        );
    }
}
