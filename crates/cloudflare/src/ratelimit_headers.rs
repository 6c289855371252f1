//! The `Ratelimit` and `Ratelimit-Policy` headers (the IETF draft's structured fields, as
//! Cloudflare sends them: `Ratelimit: "default";r=50;t=30`, `Ratelimit-Policy:
//! "default";q=1200;w=300`). `r` is what is left, `t` the seconds until more is, `q` the
//! requests of the policy's window of `w` seconds. Anything unreadable is ignored.
use std::time::Duration;

use http::HeaderMap;

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

pub(crate) fn remaining(headers: &HeaderMap) -> Option<Remaining> {
    let value = headers.get("ratelimit")?.to_str().ok()?;
    let r = parameter(value, "r")?;
    let t = parameter(value, "t")?;
    Some(Remaining {
        remaining: u32::try_from(r).unwrap_or(u32::MAX),
        reset: Duration::from_secs(t),
    })
}

pub(crate) fn policy(headers: &HeaderMap) -> Option<Policy> {
    let value = headers.get("ratelimit-policy")?.to_str().ok()?;
    let q = parameter(value, "q").filter(|q| *q > 0)?;
    let w = parameter(value, "w").filter(|w| *w > 0)?;
    Some(Policy {
        requests: u32::try_from(q).unwrap_or(u32::MAX),
        window: Duration::from_secs(w),
    })
}

/// The integer parameter `key` of the first item of a structured-field list.
fn parameter(value: &str, key: &str) -> Option<u64> {
    let first = value.split(',').next()?;
    first
        .split(';')
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
}
