/// mimalloc: the admission path allocates many small strings; glibc malloc costs it a third of
/// its throughput (see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cftunnel::cli::main()
}
