//! `race_load`: the load half of scripts/race-repro.sh (see `tools::race`).
fn main() -> std::process::ExitCode {
    tools::race::main()
}
