fn main() -> std::process::ExitCode {
    cftunnel::cli::main()
}
