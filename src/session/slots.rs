//! State that layers above the session keep per session, without the session naming them: one
//! value per type, made on first use and dropped with the session (as `http::Extensions` or
//! tokio's task-locals key state by type).
//!
//! The queue keeps its depth hints (`queue/deep.rs`) and whether the server names its events'
//! transactions (`queue/proof.rs`) here, the kept nodes their path claims (`kept/claims.rs`),
//! the double barrier its entered members; the session itself never looks inside.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One value per type, shared by every clone of a session.
#[derive(Default)]
pub(crate) struct Slots(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl Slots {
    /// The session's `T`, made with `T::default()` the first time any caller asks.
    pub fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut slots = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let slot = slots
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()));
        Arc::clone(slot)
            .downcast::<T>()
            .expect("a slot holds the type it is keyed by")
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|s| s.len()).unwrap_or(0);
        f.debug_struct("Slots").field("len", &n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counter(AtomicUsize);

    #[derive(Default)]
    struct Other(AtomicUsize);

    #[test]
    fn one_value_per_type_shared_by_every_caller() {
        let slots = Slots::default();
        slots.get::<Counter>().0.fetch_add(1, Ordering::SeqCst);
        slots.get::<Counter>().0.fetch_add(1, Ordering::SeqCst);
        assert_eq!(slots.get::<Counter>().0.load(Ordering::SeqCst), 2);
        assert_eq!(slots.get::<Other>().0.load(Ordering::SeqCst), 0);
    }
}
