//! Whether a keyed lock's directory that the client does not remember is there: a guess
//! learnt from the space's last such keys.
//!
//! A key's contender node can be made in one round trip either way, but not with one burst
//! for both cases: ZooKeeper has no "create unless it exists", and a transaction is all or
//! nothing. A burst that creates the directory (with the node, in one transaction) fails on a
//! directory that is there; a burst that creates the node alone fails on one that is not. Either
//! failure costs the server a log write (a failed transaction is logged as an error) and the
//! client a second round trip. Sending both back to back puts every unknown key in one round
//! trip, but every one of them then pays a failed write (measured and dropped, see
//! `bench/README.md`, "A key the client forgot").
//!
//! So the burst is chosen by a guess: keys of one space tend to be of one sort (a lock per
//! order: each key new; a few hot accounts locked by many processes: each directory there, made
//! by someone else or by this client more than 10 s ago). A two-bit saturating counter, as a
//! branch predictor keeps: each unknown key's outcome moves it one step, and it takes two
//! contrary outcomes in a row to change a settled guess. It starts on "not there", the cost
//! the space had before it learnt anything (a never-seen key pays nothing extra).

use std::sync::atomic::{AtomicI8, Ordering};

/// The guess for one space's unknown keys; shared by every acquisition through one
/// `ZkLockSpace` value.
#[derive(Debug, Default)]
pub(crate) struct DirGuess(AtomicI8);

/// The counter's bounds: `MIN..=0` guesses "not there", `1..=MAX` "there"; it starts at 0, so
/// the first forgotten key turns it, and a settled guess turns on the second contrary key.
const MIN: i8 = -1;
const MAX: i8 = 2;

impl DirGuess {
    /// Whether the next unknown key's directory is taken to exist (its burst then creates the
    /// node alone).
    pub fn exists(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }

    /// An unknown key's directory turned out to be there (`existed`) or not.
    pub fn learn(&self, existed: bool) {
        let step = if existed { 1 } else { -1 };
        // A lost race between two learners only loses one step of a guess.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some((n + step).clamp(MIN, MAX))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_not_there_and_follows_a_run_of_either_sort() {
        let guess = DirGuess::default();
        assert!(!guess.exists(), "a new space: the never-seen key's burst");
        guess.learn(true);
        assert!(guess.exists(), "one forgotten key turns it");
        for _ in 0..10 {
            guess.learn(true);
        }
        guess.learn(false);
        assert!(guess.exists(), "a settled guess survives one contrary key");
        guess.learn(false);
        assert!(!guess.exists(), "and turns on the second");
        for _ in 0..10 {
            guess.learn(false);
        }
        guess.learn(true);
        assert!(
            !guess.exists(),
            "settled on not there, one forgotten key is not enough"
        );
        guess.learn(true);
        assert!(guess.exists(), "the second is");
    }
}
