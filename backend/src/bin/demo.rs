//! `demo`: the seed's experiment in a few seconds (see `backend::demo`),
//! the README's first command: `cargo run --release -p backend --bin demo`.
fn main() {
    let args = proxy::settings::flags::program_args();
    std::process::exit(backend::demo::main_with_args(&args));
}
