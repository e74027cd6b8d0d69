//! `bench`: the benchmark harness (see `backend::bench`). Usually run as
//! `scripts/bench.sh`, which builds the release binaries first.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(backend::bench::main_with_args(&args));
}
