//! The `StateMachine` conformance suite on `RecordingStateMachine` (zab-coordination runs it
//! on its znode tree).

use bytes::Bytes;
use zab_core::state_machine::RecordingStateMachine;
use zab_core::testing::state_machine::{self, StateMachineBuilder};
use zab_core::testing::ConformanceError;

struct Recording;

impl StateMachineBuilder for Recording {
    type Machine = RecordingStateMachine;
    type State = RecordingStateMachine;

    fn build(&self) -> RecordingStateMachine {
        RecordingStateMachine::default()
    }

    fn payload(&self, i: u32) -> Bytes {
        Bytes::from(format!("transaction {i}"))
    }

    fn state(&self, m: &RecordingStateMachine) -> RecordingStateMachine {
        m.clone()
    }
}

#[test]
fn recording_state_machine_passes_the_state_machine_suite() -> Result<(), ConformanceError> {
    state_machine::test_all(&Recording)
}
