//! Query-string access and page slicing shared by the list operations.
use serde_json::{Value, json};

use super::envelope::ApiError;

/// Decoded query parameters in request order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: &str) -> Self {
        Query(
            url::form_urlencoded::parse(raw.as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// First value of `key`, ignoring empty values.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` appears at all (presence-style filters such as `comment.present`).
    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(ApiError::invalid_request(format!(
                "`{key}` must be true or false, got {v:?}"
            ))),
        }
    }

    /// `page` and `per_page`; out-of-range sizes are clamped, non-numbers refused.
    pub fn paging(&self, default_per_page: u64, min: u64, max: u64) -> Result<Paging, ApiError> {
        let number = |key: &str| -> Result<Option<u64>, ApiError> {
            match self.get(key) {
                None => Ok(None),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n >= 0.0)
                    .map(|n| Some(n as u64))
                    .ok_or_else(|| {
                        ApiError::invalid_request(format!("`{key}` must be a positive number"))
                    }),
            }
        };
        let page = number("page")?.unwrap_or(1).max(1);
        let per_page = number("per_page")?
            .unwrap_or(default_per_page)
            .clamp(min, max);
        Ok(Paging { page, per_page })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Paging {
    pub page: u64,
    pub per_page: u64,
}

impl Paging {
    /// Slices an already filtered, stably ordered list and builds `result_info`.
    pub fn apply(&self, items: Vec<Value>) -> (Vec<Value>, Value) {
        let total = items.len() as u64;
        let start = (self.page - 1).saturating_mul(self.per_page);
        let page: Vec<Value> = items
            .into_iter()
            .skip(usize::try_from(start).unwrap_or(usize::MAX))
            .take(usize::try_from(self.per_page).unwrap_or(usize::MAX))
            .collect();
        let info = json!({
            "page": self.page,
            "per_page": self.per_page,
            "count": page.len(),
            "total_count": total,
            "total_pages": total.div_ceil(self.per_page),
        });
        (page, info)
    }
}

/// Cloudflare's value-prefix operators for zone and account names (`contains:foo`, …).
pub(crate) fn matches_operator(value: &str, filter: &str) -> bool {
    let (op, operand) = match filter.split_once(':') {
        Some((op, rest)) if OPERATORS.contains(&op) => (op, rest),
        _ => ("equal", filter),
    };
    let sensitive = op.ends_with("_case_sensitive");
    let (value, operand) = if sensitive {
        (value.to_string(), operand.to_string())
    } else {
        (value.to_lowercase(), operand.to_lowercase())
    };
    match op.trim_end_matches("_case_sensitive") {
        "not_equal" => value != operand,
        "starts_with" => value.starts_with(&operand),
        "ends_with" => value.ends_with(&operand),
        "contains" => value.contains(&operand),
        _ => value == operand,
    }
}

const OPERATORS: [&str; 8] = [
    "equal",
    "not_equal",
    "starts_with",
    "ends_with",
    "contains",
    "starts_with_case_sensitive",
    "ends_with_case_sensitive",
    "contains_case_sensitive",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_slice_and_report_totals() {
        let items: Vec<Value> = (0..7).map(|i| json!(i)).collect();
        let (page, info) = Paging {
            page: 3,
            per_page: 3,
        }
        .apply(items);
        assert_eq!(page, vec![json!(6)]);
        assert_eq!(
            info,
            json!({"page": 3, "per_page": 3, "count": 1, "total_count": 7, "total_pages": 3})
        );
    }

    #[test]
    fn per_page_is_clamped_and_garbage_refused() {
        let q = Query::parse("per_page=9999&page=0");
        assert_eq!(
            q.paging(20, 5, 50),
            Ok(Paging {
                page: 1,
                per_page: 50
            })
        );
        let err = Query::parse("page=abc")
            .paging(20, 5, 50)
            .map_err(|e| (e.status.as_u16(), e.code));
        assert_eq!(err, Err((400, 1001)));
    }

    #[test]
    fn name_operators() {
        assert!(matches_operator("Example.COM", "example.com"));
        assert!(matches_operator("example.com", "ends_with:.com"));
        assert!(!matches_operator(
            "example.com",
            "contains_case_sensitive:EXAMPLE"
        ));
        assert!(matches_operator("example.org", "not_equal:example.com"));
    }
}
