//! `--cloudflare-budget REQUESTS/WINDOW`.
use cftunnel_cloudflare::Budget;
use cftunnel_policy::rules::duration::parse_duration;

/// `REQUESTS/WINDOW`, e.g. `900/5m`: at least one request, a window of at least a second.
pub(crate) fn parse_budget(text: &str) -> Result<Budget, String> {
    let usage = "write REQUESTS/WINDOW, e.g. 900/5m";
    let (requests, window) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: {usage}"))?;
    let requests: u32 = requests
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{text:?}: requests must be a whole number above 0; {usage}"))?;
    let window = parse_duration(window.trim()).map_err(|e| format!("{text:?}: {e}; {usage}"))?;
    if window < std::time::Duration::from_secs(1) {
        return Err(format!("{text:?}: the window must be at least 1s; {usage}"));
    }
    Ok(Budget { requests, window })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn budgets_are_read_and_bad_ones_say_how_to_write_them() {
        assert_eq!(
            parse_budget("900/5m"),
            Ok(Budget {
                requests: 900,
                window: Duration::from_secs(300)
            })
        );
        assert_eq!(
            parse_budget("45/15s").map(|b| (b.requests, b.window)),
            Ok((45, Duration::from_secs(15)))
        );
        for bad in [
            "900", "0/5m", "-1/5m", "x/5m", "900/", "900/soon", "10/500ms",
        ] {
            let error = parse_budget(bad).expect_err(bad);
            assert!(
                error.contains("REQUESTS/WINDOW, e.g. 900/5m"),
                "{bad}: {error}"
            );
        }
    }
}
