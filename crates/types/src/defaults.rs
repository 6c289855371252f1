//! Schema defaults shared by the CRDs, serde and the webhook's own defaulting.

pub fn protocol() -> String {
    "auto".into()
}

pub fn fallback_target() -> String {
    "http_status:404".into()
}

pub fn deploy_patch() -> String {
    "{}".into()
}

pub(crate) fn subject_kind() -> String {
    "Service".into()
}

pub fn proxy_address() -> String {
    "127.0.0.1".into()
}
