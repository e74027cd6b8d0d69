//! `bench`: the benchmark harness (see `tools::bench`). Usually run as
//! `scripts/bench.sh`, which builds the release binaries first.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(tools::bench::main_with_args(&args));
}
