//! End-to-end tests of every proxy mode (being written).
#[test]
fn the_binaries_under_test_exist() {
    assert!(std::path::Path::new(env!("CARGO_BIN_EXE_e2e-proxy")).exists());
    assert!(std::path::Path::new(env!("CARGO_BIN_EXE_e2e-backend")).exists());
}
