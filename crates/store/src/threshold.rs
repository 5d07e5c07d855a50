//! A size threshold that the tests of one thread may lower — they read small logs the way the code
//! reads big ones — with no knob in the build that ships (the override is `cfg(test)` only).

/// A threshold: its value, unless a test set another for the calling thread.
pub(crate) struct Threshold(u64);

#[cfg(test)]
thread_local! {
    /// (a threshold's address, the value a test of this thread set for it)
    static SET: std::cell::RefCell<Vec<(usize, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Threshold {
    pub(crate) const fn new(value: u64) -> Threshold {
        Threshold(value)
    }

    pub(crate) fn get(&'static self) -> u64 {
        #[cfg(test)]
        if let Some(n) = SET.with(|s| {
            let s = s.borrow();
            s.iter().find(|(k, _)| *k == self.key()).map(|(_, n)| *n)
        }) {
            return n;
        }
        self.0
    }

    /// Tests: `Some(n)` for the calling thread; `None`: its value again.
    #[cfg(test)]
    pub(crate) fn set(&'static self, n: Option<u64>) {
        SET.with(|s| {
            let mut s = s.borrow_mut();
            s.retain(|(k, _)| *k != self.key());
            s.extend(n.map(|n| (self.key(), n)));
        });
    }

    /// A static's address is its own.
    #[cfg(test)]
    fn key(&'static self) -> usize {
        self as *const Threshold as usize
    }
}
