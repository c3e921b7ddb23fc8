//! Spinning before parking, for a chain of threads that hand work on in turn.
//!
//! A replay on a virtual clock runs the chain "RM thread → scheduling thread
//! → callback thread → RM thread" once per step, a few hundred microseconds
//! each; every hand-off to a parked thread costs a futex wake-up, which on a
//! virtual machine is an inter-processor interrupt through the hypervisor
//! (a third of the replay's CPU time, measured in BENCHMARKS.md). A thread
//! that polls its channel for a short while before it parks is found awake
//! and costs its sender nothing. Off by default
//! ([`super::SchedulerOptions::spin_before_park`] is zero): a server whose
//! commands come from the network gains nothing from it.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};

/// What polling a channel found.
pub(crate) enum Polled<T> {
    /// A message.
    Got(T),
    /// Every sender is gone.
    Closed,
    /// Nothing within the time given: park now.
    Nothing,
}

/// Polls `rx` for up to `spin`, yielding the CPU between polls so that a
/// thread with work on the same core runs first.
pub(crate) fn poll_for<T>(rx: &Receiver<T>, spin: Duration) -> Polled<T> {
    if spin.is_zero() {
        return Polled::Nothing;
    }
    let started = Instant::now();
    let mut round = 0u32;
    loop {
        match rx.try_recv() {
            Ok(v) => return Polled::Got(v),
            Err(TryRecvError::Disconnected) => return Polled::Closed,
            Err(TryRecvError::Empty) => {}
        }
        round = round.wrapping_add(1);
        if round.is_multiple_of(4) {
            if started.elapsed() >= spin {
                return Polled::Nothing;
            }
            std::thread::yield_now();
        } else {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;

    #[test]
    fn polling_finds_a_message_a_closed_channel_or_nothing() {
        let (tx, rx) = unbounded::<u32>();
        assert!(matches!(
            poll_for(&rx, Duration::from_millis(1)),
            Polled::Nothing
        ));
        assert!(matches!(poll_for(&rx, Duration::ZERO), Polled::Nothing));
        tx.send(7).unwrap();
        assert!(matches!(poll_for(&rx, Duration::ZERO), Polled::Nothing));
        assert!(matches!(
            poll_for(&rx, Duration::from_millis(1)),
            Polled::Got(7)
        ));
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            tx.send(8).unwrap();
        });
        assert!(matches!(
            poll_for(&rx, Duration::from_secs(5)),
            Polled::Got(8)
        ));
        sender.join().unwrap();
        assert!(matches!(
            poll_for(&rx, Duration::from_millis(1)),
            Polled::Closed
        ));
    }
}
