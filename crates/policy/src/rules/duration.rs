//! Go duration strings as cloudflared reads them (`30s`, `1m30s`, `500ms`, `1.5h`).

/// Parses a Go duration into nanoseconds; `None` when it is not one.
pub(crate) fn parse_go_duration(s: &str) -> Option<u128> {
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += number * nanos_per_unit;
        rest = &rest[unit_end..];
    }
    (total.is_finite() && total < 1e20).then_some(total as u128)
}

/// A command-line duration (`10m`, `90s`, `0`), in Go's syntax as the other durations.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    parse_go_duration(text)
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(std::time::Duration::from_nanos)
        .ok_or_else(|| format!("{text:?} is not a duration; use e.g. 10m, 90s or 0"))
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("30s"), Some(30_000_000_000));
        assert_eq!(parse_go_duration("1m30s"), Some(90_000_000_000));
        assert_eq!(parse_go_duration("500ms"), Some(500_000_000));
        assert_eq!(parse_go_duration("1.5h"), Some(5_400_000_000_000));
        assert_eq!(parse_go_duration("0"), Some(0));
        for bad in ["", "30", "s", "-5s", "5 s", "5sec", "1..5s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }
}
