/// mimalloc: the admission path allocates many small strings; glibc malloc costs it a third of
/// its throughput (see BENCHMARKS.md). Built with `no_thp`: with transparent huge pages allowed,
/// mimalloc's arenas are backed by 2 MiB pages and the reconciler's steady RSS at 100 tunnels
/// was 85 MiB instead of 66 MiB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cftunnel::cli::main()
}
