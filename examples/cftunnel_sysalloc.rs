//! `cftunnel` with the system allocator instead of mimalloc, for heap profilers that follow
//! malloc (heaptrack): mimalloc's allocations are invisible to them. Same code, same flags:
//!
//! ```bash
//! cargo build --release --example cftunnel_sysalloc
//! # a wrapper that runs `heaptrack -o /tmp/ht/cftunnel.$$ <that binary> "$@"` and forwards
//! # SIGTERM to it, handed to the benchmark as `--cftunnel <wrapper>`; then
//! heaptrack_print -f /tmp/ht/cftunnel.<pid>.zst -p 1 -n 30
//! ```
//!
//! Heap figures from it are glibc's, not the shipped binary's RSS (BENCHMARKS.md has both).
fn main() -> std::process::ExitCode {
    cftunnel::cli::main()
}
