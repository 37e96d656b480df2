//! Each recipe's rule as a pure function of its queue: who holds, and which single node a
//! waiter watches. The queue is a family's contenders ordered by sequence (see
//! [`names`](super::names)); `ours` an index into it. The library decides with these very
//! functions, and `zkr inspect` shows what they say.
//!
//! A semaphore has no rule of this kind: its first `permits` leases hold, and the head of its
//! internal lock (an [`exclusive`] queue) waits for room.

use super::names::{NodeName, Wants};

/// What a contender does next.
///
/// ```
/// use zk_recipes::layout::{names::Wants, rules::{read_write, Decision}};
/// let queue = [Wants::Read, Wants::Write, Wants::Read];
/// assert_eq!(read_write(&queue, 0), Decision::Hold);
/// assert_eq!(read_write(&queue, 1), Decision::Watch(0));
/// assert_eq!(read_write(&queue, 2), Decision::Watch(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It holds.
    Hold,
    /// It waits for the node at this index of the queue to go.
    Watch(usize),
}

impl Decision {
    /// The index watched, `None` for a holder.
    ///
    /// ```
    /// use zk_recipes::layout::rules::Decision;
    /// assert_eq!(Decision::Watch(3).watched(), Some(3));
    /// assert_eq!(Decision::Hold.watched(), None);
    /// ```
    pub fn watched(self) -> Option<usize> {
        match self {
            Decision::Hold => None,
            Decision::Watch(i) => Some(i),
        }
    }
}

/// Anything a rule can read what a contender asks for from.
///
/// ```
/// use zk_recipes::layout::{names::Wants, rules::Contends};
/// assert_eq!(Wants::Read.wants(), Wants::Read);
/// ```
pub trait Contends {
    /// What it asks for.
    fn wants(&self) -> Wants;
}

impl Contends for Wants {
    fn wants(&self) -> Wants {
        *self
    }
}

impl Contends for NodeName {
    fn wants(&self) -> Wants {
        self.wants
    }
}

/// The mutex's and the election's rule: the first holds; everyone else watches its
/// predecessor.
///
/// ```
/// use zk_recipes::layout::{names::Wants, rules::{exclusive, Decision}};
/// assert_eq!(exclusive(&[Wants::Lock, Wants::Lock], 1), Decision::Watch(0));
/// ```
pub fn exclusive<C>(_queue: &[C], ours: usize) -> Decision {
    match ours.checked_sub(1) {
        None => Decision::Hold,
        Some(ahead) => Decision::Watch(ahead),
    }
}

/// The read/write rule (Curator's, ours, kazoo's): a writer holds first in line and watches its
/// predecessor; a reader holds with no writer ahead and otherwise watches the closest writer
/// ahead, so a writer's release wakes exactly the readers that can now proceed.
///
/// ```
/// use zk_recipes::layout::{names::Wants, rules::{read_write, Decision}};
/// assert_eq!(read_write(&[Wants::Read, Wants::Read], 1), Decision::Hold);
/// ```
pub fn read_write<C: Contends>(queue: &[C], ours: usize) -> Decision {
    if queue[ours].wants().is_exclusive() {
        return exclusive(queue, ours);
    }
    match queue[..ours].iter().rposition(|c| c.wants().is_exclusive()) {
        None => Decision::Hold,
        Some(writer) => Decision::Watch(writer),
    }
}
