//! Message encode/decode benches (filled in below).

fn main() {}
