//! What decoding a review will cost in memory, known before it is decoded.
//!
//! A review is decoded into `serde_json` trees (kube's `DynamicObject` buffers the whole object
//! through serde's `Content` for its flattened fields, then builds a `Value` tree), and that tree
//! costs far more than the body: ~700 bytes per small JSON object (a B-tree node), 32 bytes per
//! array element (twice over while buffered). How much more depends on the shape, not the size:
//! 60,000 env entries in a 2.5 MiB Deployment decode to ~45 MiB, while a body of nothing but
//! `{"a":0}` objects would cost ~130× its size. So the cost is read from the shape: one pass
//! over the bytes, allocating nothing, counts objects, members, array elements and string bytes,
//! and [`decode_cost`] turns them into an upper estimate of the bytes held while decoding.
//! The webhook reserves that estimate, weighed by what the endpoint does with the tree
//! ([`Endpoint::cost_factor`]), from a fixed budget before decoding (see `handlers.rs`).
use super::metrics::Endpoint;

/// A non-empty object: one B-tree leaf of `serde_json::Map` (11 slots of a 24-byte key and a
/// 32-byte value, 640 bytes in mimalloc's bins) and serde's buffered `Content` map (a vector of
/// 64-byte pairs, at least 4 of them).
const OBJECT: usize = 640 + 4 * 64;
/// Each member past the fourth: B-tree nodes are at least half full (5 of 11 slots, so at most
/// 128 bytes a member), and the `Content` vector doubles (at most 2 × 64 bytes a member).
const MEMBER: usize = 128 + 128;
/// A non-empty array: the `Value` and `Content` vectors start at 4 elements of 32 bytes.
const ARRAY: usize = 2 * 4 * 32;
/// Each array element: both vectors double (at most 2 × 32 bytes each), and the one being
/// grown is held twice while it is copied.
const ELEMENT: usize = 2 * 2 * 32 + 32;
/// Each string (key or value): an allocation of at most its length, rounded up to mimalloc's
/// size class (at most 1/4 more, at least 8 bytes); an escaped one is also owned by `Content`.
const STRING: usize = 16;
/// Nesting deeper than `serde_json` accepts (128) is refused while decoding; frames past this
/// depth are not tracked, so the scan itself allocates a bounded amount.
const MAX_TRACKED_DEPTH: usize = 256;

/// How much deciding a review at an endpoint may take, as a multiple of its decode cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostFactor {
    numerator: usize,
    denominator: usize,
}

impl CostFactor {
    /// `cost` times the factor, saturating.
    pub fn weigh(self, cost: usize) -> usize {
        cost.saturating_mul(self.numerator) / self.denominator
    }
}

impl Endpoint {
    /// What deciding costs beside the decoded tree:
    /// - validate: ×1.5, the typed copy the rules read (a TunnelBinding's 30,000 subjects as
    ///   structs with their defaults: a server deciding one such review, estimated at 60 MiB
    ///   of trees, peaked 90 MiB above its resting RSS, body and connections included);
    /// - mutate: ×1, the hardening works on sparse copies of a few fields;
    /// - convert: ×2, every object is converted into a copy that goes into the answer.
    pub fn cost_factor(self) -> CostFactor {
        let (numerator, denominator) = match self {
            Endpoint::Validate => (3, 2),
            Endpoint::Mutate => (1, 1),
            Endpoint::Convert => (2, 1),
        };
        CostFactor {
            numerator,
            denominator,
        }
    }
}

#[derive(Clone, Copy)]
struct Frame {
    object: bool,
    commas: usize,
    nonempty: bool,
}

impl Frame {
    fn cost(self) -> usize {
        if !self.nonempty {
            return 0;
        }
        let items = self.commas + 1;
        if self.object {
            OBJECT.saturating_add(MEMBER.saturating_mul(items.saturating_sub(4)))
        } else {
            ARRAY.saturating_add(ELEMENT.saturating_mul(items))
        }
    }
}

/// Upper estimate of the bytes held while `body` is decoded into a review; the body itself is
/// not included. Any bytes are accepted: what is not JSON costs what its brackets and quotes
/// would (decoding stops at the first error, so it costs less).
pub fn decode_cost(body: &[u8]) -> usize {
    let mut cost = 0usize;
    let mut stack: Vec<Frame> = Vec::with_capacity(32);
    let mut untracked = 0usize;
    let mut bytes = body.iter();
    let mark = |stack: &mut Vec<Frame>| {
        if let Some(frame) = stack.last_mut() {
            frame.nonempty = true;
        }
    };
    while let Some(&byte) = bytes.next() {
        match byte {
            b'"' => {
                mark(&mut stack);
                let (len, escaped) = string_len(&mut bytes);
                let once = STRING + len + len / 4;
                cost = cost.saturating_add(if escaped { 2 * once } else { once });
            }
            b'{' | b'[' => {
                mark(&mut stack);
                if untracked > 0 || stack.len() >= MAX_TRACKED_DEPTH {
                    untracked += 1;
                } else {
                    stack.push(Frame {
                        object: byte == b'{',
                        commas: 0,
                        nonempty: false,
                    });
                }
            }
            b'}' | b']' => {
                if untracked > 0 {
                    untracked -= 1;
                } else if let Some(frame) = stack.pop() {
                    cost = cost.saturating_add(frame.cost());
                }
            }
            b',' if untracked == 0 => {
                if let Some(frame) = stack.last_mut() {
                    frame.commas += 1;
                }
            }
            b':' | b',' | b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => mark(&mut stack),
        }
    }
    stack
        .into_iter()
        .fold(cost, |cost, frame| cost.saturating_add(frame.cost()))
}

/// Reads a string's bytes up to its closing quote: its length, and whether it has escapes.
fn string_len(bytes: &mut std::slice::Iter<'_, u8>) -> (usize, bool) {
    let mut len = 0;
    let mut escaped = false;
    while let Some(&byte) = bytes.next() {
        match byte {
            b'"' => break,
            b'\\' => {
                escaped = true;
                bytes.next();
                len += 1;
            }
            _ => len += 1,
        }
    }
    (len, escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_objects_members_elements_and_strings() {
        assert_eq!(decode_cost(b""), 0);
        assert_eq!(decode_cost(b"{}"), 0);
        assert_eq!(decode_cost(b"[ ]"), 0);
        assert_eq!(decode_cost(b"{\"a\":1}"), OBJECT + STRING + 1);
        assert_eq!(decode_cost(b"[1,2,3]"), ARRAY + 3 * ELEMENT);
        let six = br#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}"#;
        assert_eq!(decode_cost(six), OBJECT + 2 * MEMBER + 6 * (STRING + 1));
        // Brackets, commas and colons inside strings are text; an escaped string counts twice.
        assert_eq!(
            decode_cost(br#"["a,]{", "x\"y"]"#),
            ARRAY + 2 * ELEMENT + (STRING + 4 + 1) + 2 * (STRING + 3)
        );
    }

    #[test]
    fn nesting_and_unclosed_input_are_counted_without_unbounded_state() {
        let nested = [b'['; 100_000];
        // Only the tracked frames are charged, each holding one element (the next array).
        assert_eq!(decode_cost(&nested), MAX_TRACKED_DEPTH * (ARRAY + ELEMENT));
        assert_eq!(
            decode_cost(b"{\"a\":[1"),
            OBJECT + STRING + 1 + ARRAY + ELEMENT
        );
        assert_eq!(decode_cost(b"\"unterminated"), STRING + 12 + 3);
    }

    #[test]
    fn each_endpoint_weighs_the_cost_by_what_it_copies() {
        assert_eq!(Endpoint::Validate.cost_factor().weigh(60), 90);
        assert_eq!(Endpoint::Mutate.cost_factor().weigh(60), 60);
        assert_eq!(Endpoint::Convert.cost_factor().weigh(60), 120);
        assert_eq!(
            Endpoint::Convert.cost_factor().weigh(usize::MAX),
            usize::MAX
        );
    }

    #[test]
    fn small_dense_objects_cost_more_than_large_strings_of_the_same_size() {
        let dense = format!("[{}]", vec![r#"{"a":0}"#; 10_000].join(","));
        let text = format!("[\"{}\"]", "x".repeat(dense.len()));
        assert!(decode_cost(dense.as_bytes()) > 100 * dense.len());
        assert!(decode_cost(text.as_bytes()) < 2 * text.len());
    }
}
