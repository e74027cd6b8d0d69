//! Fuzzes the relay machine (`proxy::conn::machine`) through the seeded
//! simulator of testkit (`testkit::sim`): the input is a schedule, every
//! byte a decision (the peers' plans, short reads and writes, resets,
//! FINs, pauses, the clock), and the simulator checks the relay's whole
//! contract at every step: bytes delivered exactly, in order, once; a FIN
//! only after every byte before it; a reset passed on as a reset; one
//! ending, the right one, each deadline at its time; no step without
//! progress. A failure panics with the promise broken; its input replays
//! with `relay-sim --schedule HEX` (the hex of the input file).
#![no_main]

use libfuzzer_sys::fuzz_target;
use testkit::sim::choices::Choices;
use testkit::sim::{Config, run};

fuzz_target!(|data: &[u8]| {
    let config = Config::default();
    if let Err(failure) = run(&mut Choices::given(data), &config) {
        panic!("step {}: {}", failure.step, failure.violation);
    }
});
