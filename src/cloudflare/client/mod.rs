//! Typed Cloudflare API v4 client: envelope, typed errors, per-credential rate limiting, retries.
