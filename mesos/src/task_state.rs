//! What both sides of the scheduler and resource provider APIs need to know
//! about task and operation states.

use crate::v1::{OperationState, TaskState};

impl TaskState {
    /// True for a state a task never leaves (its resources are free again).
    pub fn is_terminal(self) -> bool {
        use TaskState::*;
        matches!(
            self,
            TaskFinished
                | TaskFailed
                | TaskKilled
                | TaskError
                | TaskLost
                | TaskDropped
                | TaskGone
                | TaskGoneByOperator
                | TaskUnknown
        )
    }
}

impl OperationState {
    /// True for a state an operation never leaves (its status is final).
    pub fn is_terminal(self) -> bool {
        use OperationState::*;
        matches!(
            self,
            OperationFinished
                | OperationFailed
                | OperationError
                | OperationDropped
                | OperationGoneByOperator
        )
    }
}

#[cfg(test)]
mod tests {
    use super::TaskState::*;

    #[test]
    fn terminal_states() {
        for s in [
            TaskStaging,
            TaskStarting,
            TaskRunning,
            TaskKilling,
            TaskUnreachable,
        ] {
            assert!(!s.is_terminal(), "{s:?}");
        }
        for s in [
            TaskFinished,
            TaskFailed,
            TaskKilled,
            TaskError,
            TaskLost,
            TaskDropped,
            TaskGone,
            TaskGoneByOperator,
            TaskUnknown,
        ] {
            assert!(s.is_terminal(), "{s:?}");
        }
    }

    #[test]
    fn terminal_operation_states() {
        use crate::v1::OperationState::*;
        for s in [
            OperationPending,
            OperationUnreachable,
            OperationRecovering,
            OperationUnknown,
            OperationUnsupported,
        ] {
            assert!(!s.is_terminal(), "{s:?}");
        }
        for s in [
            OperationFinished,
            OperationFailed,
            OperationError,
            OperationDropped,
            OperationGoneByOperator,
        ] {
            assert!(s.is_terminal(), "{s:?}");
        }
    }
}
