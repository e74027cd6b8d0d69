//! A generational slab: a `Vec` of slots with a free list, whose keys name
//! both a slot and the *generation* of what lives in it.
//!
//! The reactor stores one entry per registered descriptor and gives epoll
//! the key as the event's 64-bit token; the executor stores one entry per
//! task and wakers carry the key. Both face the same danger: a slot is freed
//! and reused while an old key is still around (an event already queued in
//! the kernel for a closed socket, a waker for a finished task). The
//! generation makes the old key miss instead of hitting the newcomer:
//!
//! ```text
//!   key (u64) = generation (high 32 bits) | index (low 32 bits)
//!
//!   slot 7: gen 3, socket A     old event carries (3, 7) -> hits A
//!   A closed, slot 7 freed      gen becomes 4
//!   slot 7: gen 4, socket B     late event (3, 7) -> generation differs -> ignored
//! ```

/// A key into a [`Slab`]: slot index plus the generation it was issued for.
pub(crate) type Key = u64;

fn pack(generation: u32, index: u32) -> Key {
    (u64::from(generation) << 32) | u64::from(index)
}

fn unpack(key: Key) -> (u32, usize) {
    ((key >> 32) as u32, (key & 0xffff_ffff) as usize)
}

/// One place in the slab. The generation lives in both states: a free slot
/// remembers it, so that the next value stored there gets a new one.
///
/// An enum rather than a generation beside an `Option<T>`: the tag shares
/// the generation's word, so a slot is the value plus 8 bytes (48 for the
/// reactor's 40-byte `ScheduledIo`, where the `Option` would need 56).
#[derive(Debug)]
enum Slot<T> {
    Full { generation: u32, value: T },
    Free { generation: u32 },
}

/// The slab itself. Freed slots are reused last-in first-out, which keeps
/// recently touched memory warm.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// How many entries are stored.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stores a value built from its own key (a task's header needs to know
    /// its key, for instance) and returns the key.
    pub(crate) fn insert_with(&mut self, make: impl FnOnce(Key) -> T) -> Key {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot::Free { generation: 0 });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        let generation = slot.generation();
        let key = pack(generation, index);
        *slot = Slot::Full {
            generation,
            value: make(key),
        };
        self.len += 1;
        key
    }

    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        let (generation, index) = unpack(key);
        match self.slots.get(index)? {
            Slot::Full {
                generation: g,
                value,
            } if *g == generation => Some(value),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let (generation, index) = unpack(key);
        match self.slots.get_mut(index)? {
            Slot::Full {
                generation: g,
                value,
            } if *g == generation => Some(value),
            _ => None,
        }
    }

    /// Removes and returns the entry, and bumps the slot's generation so the
    /// old key can never reach whatever is stored there next.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let (generation, index) = unpack(key);
        let slot = self.slots.get_mut(index)?;
        if slot.generation() != generation {
            return None;
        }
        let value = slot.take()?;
        self.free.push(index as u32);
        self.len -= 1;
        Some(value)
    }

    /// Takes every entry out, leaving the slab empty.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if let Some(value) = slot.take() {
                self.free.push(index as u32);
                out.push(value);
            }
        }
        self.len = 0;
        out
    }
}

impl<T> Slot<T> {
    fn generation(&self) -> u32 {
        match self {
            Slot::Full { generation, .. } | Slot::Free { generation } => *generation,
        }
    }

    /// Empties a full slot, under the next generation; None if it was free.
    fn take(&mut self) -> Option<T> {
        let freed = Slot::Free {
            generation: self.generation().wrapping_add(1),
        };
        match std::mem::replace(self, freed) {
            Slot::Full { value, .. } => Some(value),
            free => {
                *self = free;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_key_misses_the_slots_next_tenant() {
        let mut slab = Slab::new();
        let a = slab.insert_with(|_| "a");
        assert_eq!(slab.remove(a), Some("a"));
        let b = slab.insert_with(|_| "b");
        assert_eq!(unpack(a).1, unpack(b).1, "the slot is reused");
        assert_ne!(a, b, "but under a new generation");
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&"b"));
    }

    #[test]
    fn insert_with_sees_its_own_key_and_len_tracks_entries() {
        let mut slab = Slab::new();
        let keys: Vec<Key> = (0..10).map(|i| slab.insert_with(|k| (k, i))).collect();
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(slab.get(k), Some(&(k, i)));
        }
        assert_eq!(slab.len(), 10);
        assert_eq!(slab.drain().len(), 10);
        assert_eq!(slab.len(), 0);
        assert!(keys.iter().all(|&k| slab.get(k).is_none()));
    }

    #[test]
    fn a_slot_is_its_value_and_one_word() {
        // What the comment on `Slot` claims, for a value the size of the
        // reactor's `ScheduledIo` (40 bytes, no niche to spare).
        assert_eq!(std::mem::size_of::<Slot<(u64, [usize; 4])>>(), 48);
        assert_eq!(std::mem::size_of::<Option<(u64, [usize; 4])>>(), 48);
    }
}
