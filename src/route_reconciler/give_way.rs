//! When an iteration's status writes give way to the next table. A first sync writes thousands
//! of statuses per iteration (a minute and more at ten thousand routes); a tunnel created
//! meanwhile must not wait for all of them before a table knows it, nor a deleted one before its
//! DNS records go. Statuses left unwritten are written by the next iteration, from its table.
use std::time::{Duration, Instant};

/// How long an iteration writes statuses before a tunnel created or deleted makes it stop.
pub(super) const WRITE_SLICE: Duration = Duration::from_secs(10);

/// How often the tunnels are compared once the slice is over (each look lists them).
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Asked before each status write; `differ` says whether the tunnels differ from the table's.
pub(super) struct GiveWay<F: FnMut() -> bool> {
    differ: F,
    next_look: Instant,
    given: bool,
}

impl<F: FnMut() -> bool> GiveWay<F> {
    /// Writes started now; the tunnels are first compared once `slice` has passed.
    pub(super) fn new(slice: Duration, differ: F) -> GiveWay<F> {
        GiveWay {
            differ,
            next_look: Instant::now() + slice,
            given: false,
        }
    }

    /// Whether the writes should stop (and stay stopped) for the next table.
    pub(super) fn now(&mut self) -> bool {
        if !self.given {
            let now = Instant::now();
            if now >= self.next_look {
                self.next_look = now + LOOK_EVERY;
                self.given = (self.differ)();
            }
        }
        self.given
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_give_way_only_after_the_slice_and_only_to_changed_tunnels() {
        // Within the slice the tunnels are not even compared.
        let mut looked = 0;
        {
            let mut within = GiveWay::new(Duration::from_secs(3600), || {
                looked += 1;
                true
            });
            assert!(!within.now());
        }
        assert_eq!(looked, 0);
        // After it: unchanged tunnels keep the writes going; a changed one stops them for good.
        assert!(!GiveWay::new(Duration::ZERO, || false).now());
        // A look that finds them changed only at the second look (the third would not).
        let mut looks = 0;
        let mut after = GiveWay::new(Duration::ZERO, || {
            looks += 1;
            looks == 2
        });
        // Unchanged at the first look; the next look is a second away.
        assert!(!after.now());
        after.next_look = Instant::now();
        assert!(after.now());
        // Stopped for good: no further look undoes it.
        after.next_look = Instant::now();
        assert!(after.now());
    }
}
