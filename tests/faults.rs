//! Cloudflare's and Kubernetes' bad days, end to end on a real API server with `cftunnel run`
//! as its own process: a storm of 5xx and 429 answers, Cloudflare down during deletions,
//! answers lost after their write was applied, a 30 s API server outage, and a leader killed
//! while its DNS writes are in flight. Every case runs beside a control with the same workload
//! and no fault.
mod common;
#[path = "faults/deletion.rs"]
mod deletion;
#[path = "faults/failover.rs"]
mod failover;
#[path = "faults/harness.rs"]
mod harness;
mod install_support;
#[path = "faults/lost_answers.rs"]
mod lost_answers;
#[path = "faults/outage.rs"]
mod outage;
#[path = "faults/storm.rs"]
mod storm;
