//! Test-only breakage (feature `never-in-production`): one planted decoder bug, so a test can
//! show that the value conformance test against `kafka-protocol` catches a decoder that reads
//! two same-typed fields into each other's place. The bug is off on every thread unless a
//! test turns it on for its own thread with [`with_swapped_epochs`].

use std::cell::Cell;

thread_local! {
    static SWAPPED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the LeaderAndIsr partition-state decoder of this thread swapping
/// `leader_epoch` and `partition_epoch`; the decoder is correct again afterwards, even if `f`
/// panics.
pub fn with_swapped_epochs<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            SWAPPED.with(|s| s.set(self.0));
        }
    }
    let _reset = Reset(SWAPPED.with(|s| s.replace(true)));
    f()
}

/// Whether this thread's LeaderAndIsr partition-state decoder swaps the two epochs.
#[doc(hidden)]
pub fn decoder_swaps_epochs() -> bool {
    SWAPPED.with(Cell::get)
}
