//! The shapes of the ids and times the simulator hands out.

/// Current time in RFC 3339 UTC.
pub(crate) fn now() -> String {
    jiff::Timestamp::now().to_string()
}

/// 32 lowercase hex characters, the shape of account, zone and record ids.
pub(crate) fn hex_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A random v4 UUID, the shape of tunnel and connector ids.
pub(crate) fn uuid_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
