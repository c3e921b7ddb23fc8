//! The `unisched` command line.
fn main() {}
