//! What both sides of the scheduler API need to know about task states.

use crate::v1::TaskState;

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
}
