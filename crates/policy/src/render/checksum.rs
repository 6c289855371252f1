//! The pod-template checksum (docs/design.md §3.4): what cloudflared reads only at start-up, hashed so a
//! change rolls the pods and an unchanged render never does.
use sha2::{Digest, Sha256};

/// SHA-256 (hex) of `parts`, each encoded as length-prefixed name and length-prefixed value, with
/// a presence byte so an absent part never hashes like an empty one.
pub fn checksum(parts: &[(&str, Option<&[u8]>)]) -> String {
    let mut hasher = Sha256::new();
    for (name, value) in parts {
        hasher.update((name.len() as u64).to_be_bytes());
        hasher.update(name.as_bytes());
        match value {
            Some(bytes) => {
                hasher.update([1u8]);
                hasher.update((bytes.len() as u64).to_be_bytes());
                hasher.update(bytes);
            }
            None => hasher.update([0u8]),
        }
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The checksum of a tunnel's rendered config.yaml, credentials.json and origin CA pool.
pub(crate) fn workload_checksum(
    config_yaml: &str,
    credentials_json: &[u8],
    origin_ca: Option<&str>,
) -> String {
    checksum(&[
        ("config.yaml", Some(config_yaml.as_bytes())),
        ("credentials.json", Some(credentials_json)),
        ("originCaPool", origin_ca.map(str::as_bytes)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_and_absence_are_part_of_the_hash() {
        let a = checksum(&[("x", Some(b"ab")), ("y", Some(b"c"))]);
        let b = checksum(&[("x", Some(b"a")), ("y", Some(b"bc"))]);
        assert_ne!(a, b);
        assert_ne!(checksum(&[("x", None)]), checksum(&[("x", Some(b""))]));
        assert_eq!(a, checksum(&[("x", Some(b"ab")), ("y", Some(b"c"))]));
        assert_eq!(a.len(), 64);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }
}
