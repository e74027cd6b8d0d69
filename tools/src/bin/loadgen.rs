//! `loadgen`: the load client on the command line (see `tools::load::cli`).
fn main() -> std::process::ExitCode {
    tools::load::cli::main()
}
