//! Which credentials write each tunnel's DNS (docs/design.md §3.3).
//!
//! A tunnel names its API credentials by reference (a Secret and the keys read from it); what
//! groups tunnels for one DNS sync is the credential that reference holds, so tunnels whose
//! Secrets hold one token share a zone's batches however many Secrets carry it (a copy per
//! namespace is common). Each sync round reads every referenced Secret once; a Secret whose
//! token changed moves its tunnels to the group of the new token at once, so a group is
//! always written with the credential each of its tunnels names now.
use std::collections::{BTreeMap, HashMap};

use crate::dns_sync::TunnelRecord;
use crate::term::Context;
use crate::term::credentials::read_api_secret;
use cftunnel_cloudflare::Credentials;

/// One way of naming API credentials: the same Secret read through the same keys (two tunnels
/// may name one Secret but read a token from different keys, or a global key with different
/// emails).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct CredentialRef {
    pub secret_namespace: String,
    pub secret: String,
    pub api_token_key: String,
    pub api_key_key: String,
    pub email: Option<String>,
}

impl CredentialRef {
    pub fn of(r: &TunnelRecord) -> CredentialRef {
        CredentialRef {
            secret_namespace: r.secret_namespace.clone(),
            secret: r.cloudflare.secret.clone(),
            api_token_key: r.cloudflare.api_token_key.clone(),
            api_key_key: r.cloudflare.api_key_key.clone(),
            email: r.cloudflare.email.clone().filter(|e| !e.is_empty()),
        }
    }
}

/// What a DNS group is keyed by besides its zone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum CredentialKey {
    /// The fingerprint of the credential the references resolved to (it reveals nothing).
    Credential(String),
    /// A reference whose Secret could not be read into a credential (or was not read yet):
    /// its tunnels are a group of their own, which reports why.
    Unread(CredentialRef),
}

/// The credentials of one sync round: every reference of the round, resolved once.
#[derive(Clone, Debug, Default)]
pub(super) struct Resolved {
    keys: BTreeMap<CredentialRef, String>,
    credentials: HashMap<String, Credentials>,
    errors: BTreeMap<CredentialRef, String>,
}

impl Resolved {
    /// Reads the Secret of every reference among `records` that is not being deleted, once.
    pub async fn read(ctx: &Context, records: &[TunnelRecord]) -> Resolved {
        let mut resolved = Resolved::default();
        for r in records.iter().filter(|r| !r.deleting) {
            let reference = CredentialRef::of(r);
            if resolved.keys.contains_key(&reference) || resolved.errors.contains_key(&reference) {
                continue;
            }
            match read_api_secret(&ctx.client, &r.secret_namespace, &r.cloudflare).await {
                Ok(secret) => resolved.insert(reference, secret.credentials),
                Err(error) => {
                    resolved.errors.insert(reference, error.to_string());
                }
            }
        }
        resolved
    }

    /// Records that `reference` holds `credentials`.
    pub fn insert(&mut self, reference: CredentialRef, credentials: Credentials) {
        let fingerprint = credentials.fingerprint();
        self.keys.insert(reference, fingerprint.clone());
        self.credentials.insert(fingerprint, credentials);
    }

    /// The group key of the tunnels naming `reference`.
    pub fn key(&self, reference: &CredentialRef) -> CredentialKey {
        match self.keys.get(reference) {
            Some(fingerprint) => CredentialKey::Credential(fingerprint.clone()),
            None => CredentialKey::Unread(reference.clone()),
        }
    }

    /// The credential `reference` holds, if its Secret could be read.
    pub fn of(&self, reference: &CredentialRef) -> Option<&Credentials> {
        self.keys
            .get(reference)
            .and_then(|fingerprint| self.credentials.get(fingerprint))
    }

    /// The credential a group is written with, or why there is none.
    pub(crate) fn for_group(&self, key: &CredentialKey) -> Result<&Credentials, String> {
        match key {
            CredentialKey::Credential(fingerprint) => self
                .credentials
                .get(fingerprint)
                .ok_or_else(|| "its API Secret was not read yet".to_string()),
            CredentialKey::Unread(reference) => Err(self
                .errors
                .get(reference)
                .cloned()
                .unwrap_or_else(|| "its API Secret was not read yet".to_string())),
        }
    }
}
