//! In-memory Cloudflare API simulator: a real HTTP server speaking the v4 envelope.
