//! The conformance suite of [`StateMachine`]: what every replicated state on top of Zab must
//! do, per the trait's documentation — a new machine has applied nothing, `apply` advances
//! `last_applied` and is deterministic (Z2: the same history gives the same state on every
//! server), a snapshot restored elsewhere is the same state and goes on identically, `restore`
//! replaces whatever was there, a snapshot cut short is refused with a [`SnapshotError`]
//! (never a panic), and `reset` discards everything so that the state can be rebuilt (TRUNC).
//!
//! The builder supplies the history: the payload of the `i`-th transaction of a valid
//! sequence, since only the machine knows what its payloads mean.
//!
//! ```
//! use bytes::Bytes;
//! use zab_core::state_machine::RecordingStateMachine;
//! use zab_core::testing::state_machine::{self, StateMachineBuilder};
//!
//! struct Recording;
//! impl StateMachineBuilder for Recording {
//!     type Machine = RecordingStateMachine;
//!     type State = RecordingStateMachine;
//!     fn build(&self) -> RecordingStateMachine {
//!         RecordingStateMachine::default()
//!     }
//!     fn payload(&self, i: u32) -> Bytes {
//!         Bytes::from(format!("txn {i}"))
//!     }
//!     fn state(&self, m: &RecordingStateMachine) -> RecordingStateMachine {
//!         m.clone()
//!     }
//! }
//! state_machine::test_all(&Recording)?;
//! # Ok::<(), zab_core::testing::ConformanceError>(())
//! ```
//!
//! [`SnapshotError`]: crate::state_machine::SnapshotError

use std::fmt::Debug;

use bytes::Bytes;

use super::{Case, ConformanceError};
use crate::state_machine::StateMachine;
use crate::txnlog::{Snapshot, Txn};
use crate::zxid::Zxid;

/// What the suite needs from a [`StateMachine`] implementation.
pub trait StateMachineBuilder {
    /// The machine under test.
    type Machine: StateMachine;
    /// A comparable view of a machine's whole state (two machines are in the same state when
    /// their views are equal).
    type State: PartialEq + Debug;

    /// A new, empty machine, independent of every machine built before.
    fn build(&self) -> Self::Machine;

    /// The payload of transaction `i` (from 1) of a valid history: each applies after
    /// transactions `1..i`, and no two give the same state.
    fn payload(&self, i: u32) -> Bytes;

    /// The view of `machine`'s state.
    fn state(&self, machine: &Self::Machine) -> Self::State;
}

/// Runs every case in order and stops at the first failure.
pub fn test_all<B: StateMachineBuilder>(builder: &B) -> Result<(), ConformanceError> {
    a_new_machine_has_applied_nothing(builder)?;
    apply_advances_last_applied(builder)?;
    the_same_history_gives_the_same_state(builder)?;
    a_restored_snapshot_is_the_same_state_and_goes_on_alike(builder)?;
    restore_replaces_the_previous_state(builder)?;
    a_snapshot_cut_short_is_refused(builder)?;
    reset_discards_everything(builder)?;
    Ok(())
}

fn txn<B: StateMachineBuilder>(builder: &B, i: u32) -> Txn {
    Txn::new(Zxid::new(1, i), builder.payload(i))
}

fn apply_range<B: StateMachineBuilder>(
    builder: &B,
    m: &mut B::Machine,
    range: std::ops::RangeInclusive<u32>,
) {
    for i in range {
        m.apply(&txn(builder, i));
    }
}

/// A new machine's `last_applied` is zero.
pub fn a_new_machine_has_applied_nothing<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_new_machine_has_applied_nothing");
    let m = builder.build();
    c.eq(
        "last applied of a new machine",
        m.last_applied(),
        Zxid::ZERO,
    )
}

/// `last_applied` is the zxid of the last applied transaction; each one changes the state.
pub fn apply_advances_last_applied<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("apply_advances_last_applied");
    let mut m = builder.build();
    let mut states = vec![builder.state(&m)];
    for i in 1..=5 {
        m.apply(&txn(builder, i));
        c.eq("last applied", m.last_applied(), Zxid::new(1, i))?;
        let s = builder.state(&m);
        c.ensure(!states.contains(&s), || {
            format!("transaction {i} left the state as it was: {s:?}")
        })?;
        states.push(s);
    }
    Ok(())
}

/// Two machines applying the same history are in the same state (Z2).
pub fn the_same_history_gives_the_same_state<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("the_same_history_gives_the_same_state");
    let (mut a, mut b) = (builder.build(), builder.build());
    apply_range(builder, &mut a, 1..=6);
    apply_range(builder, &mut b, 1..=6);
    c.eq(
        "state of the second machine",
        builder.state(&b),
        builder.state(&a),
    )?;
    c.eq(
        "snapshot zxid",
        b.take_snapshot().zxid,
        a.take_snapshot().zxid,
    )
}

/// A snapshot restored on a new machine gives the same state and `last_applied`; both then
/// apply the next transactions alike (SNAP synchronisation).
pub fn a_restored_snapshot_is_the_same_state_and_goes_on_alike<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_restored_snapshot_is_the_same_state_and_goes_on_alike");
    let mut a = builder.build();
    apply_range(builder, &mut a, 1..=5);
    let snap = a.take_snapshot();
    c.eq("snapshot zxid", snap.zxid, Zxid::new(1, 5))?;
    let mut b = builder.build();
    c.op("restore", b.restore(&snap))?;
    c.eq(
        "last applied after restore",
        b.last_applied(),
        Zxid::new(1, 5),
    )?;
    c.eq("state after restore", builder.state(&b), builder.state(&a))?;
    apply_range(builder, &mut a, 6..=8);
    apply_range(builder, &mut b, 6..=8);
    c.eq(
        "state after more transactions",
        builder.state(&b),
        builder.state(&a),
    )?;
    // An empty machine's snapshot restores to an empty state.
    let empty = builder.build();
    c.op(
        "restore an empty snapshot",
        b.restore(&empty.take_snapshot()),
    )?;
    c.eq(
        "state after restoring an empty snapshot",
        builder.state(&b),
        builder.state(&empty),
    )
}

/// `restore` replaces the whole state, whatever the machine had applied.
pub fn restore_replaces_the_previous_state<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("restore_replaces_the_previous_state");
    let mut a = builder.build();
    apply_range(builder, &mut a, 1..=3);
    let snap = a.take_snapshot();
    let mut b = builder.build();
    apply_range(builder, &mut b, 1..=7);
    c.op("restore an older snapshot", b.restore(&snap))?;
    c.eq("last applied", b.last_applied(), Zxid::new(1, 3))?;
    c.eq("state", builder.state(&b), builder.state(&a))
}

/// A snapshot missing its last byte is refused with a typed error, and nothing panics.
pub fn a_snapshot_cut_short_is_refused<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_snapshot_cut_short_is_refused");
    let mut a = builder.build();
    apply_range(builder, &mut a, 1..=4);
    let snap = a.take_snapshot();
    c.ensure(!snap.data.is_empty(), || {
        "the snapshot of four transactions is empty".into()
    })?;
    let short = Snapshot {
        zxid: snap.zxid,
        data: snap.data.slice(..snap.data.len() - 1),
    };
    let mut b = builder.build();
    c.ensure(b.restore(&short).is_err(), || {
        "a snapshot missing its last byte was restored".into()
    })
}

/// `reset` empties the machine (the state of a new one, nothing applied); the history can
/// then be applied again from the start (TRUNC rebuilds the state this way).
pub fn reset_discards_everything<B: StateMachineBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("reset_discards_everything");
    let mut a = builder.build();
    apply_range(builder, &mut a, 1..=5);
    a.reset();
    c.eq("last applied after reset", a.last_applied(), Zxid::ZERO)?;
    let fresh = builder.build();
    c.eq(
        "state after reset",
        builder.state(&a),
        builder.state(&fresh),
    )?;
    apply_range(builder, &mut a, 1..=3);
    let mut b = builder.build();
    apply_range(builder, &mut b, 1..=3);
    c.eq(
        "state after replaying",
        builder.state(&a),
        builder.state(&b),
    )
}
