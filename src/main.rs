/// mimalloc: the admission path allocates many small strings; glibc malloc costs it a third of
/// its throughput (see BENCHMARKS.md). Built with `no_thp`: with transparent huge pages allowed,
/// mimalloc's arenas are backed by 2 MiB pages and the reconciler's steady RSS at 100 tunnels
/// was 85 MiB instead of 66 MiB. Its v2 line (the `v2` feature): v2 gives freed pages back to
/// the system after 10 ms, v3 after a second, which at 1,000 tunnels and 10,000 routes kept
/// about 11 MiB more resident at the first sync's peak.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cftunnel::cli::main()
}
