//! Large reviews are decided on one thread of their own.
//!
//! A review at the body limit takes about 70 MiB to decode and judge. The decoding budget lets
//! one such review be decided at a time, but the allocator (mimalloc) keeps what a thread freed
//! in that thread's heap until the thread allocates again: decided on whichever thread of the
//! blocking pool was free, each large review left its 70 MiB resident on an idle thread, and the
//! next one, on another thread, added its own (32 clients sending two reviews of 2.3 MiB each
//! peaked at 168 MiB against 113 MiB for one review). On one thread, each large review reuses
//! the memory the one before it freed.
//!
//! Which reviews: those whose reservation from the decoding budget is at least a quarter of the
//! budget ([`LargeReviews::is_large`]), so at most four could be reserved at once anyway; they
//! now wait for one another. Smaller reviews are decided where they were.
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

/// The thread that decides large reviews, started with the first one.
pub(super) struct LargeReviews {
    threshold: usize,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

impl LargeReviews {
    /// Reviews reserving at least a quarter of `decoding_budget` bytes are large.
    pub(super) fn new(decoding_budget: usize) -> LargeReviews {
        LargeReviews {
            threshold: decoding_budget / 4,
            jobs: Mutex::new(None),
        }
    }

    /// Is a review reserving `reserved` bytes decided on the large-review thread?
    pub(super) fn is_large(&self, reserved: usize) -> bool {
        reserved >= self.threshold.max(1)
    }

    /// Runs `decide` on the large-review thread and waits for its answer (call it from a
    /// blocking thread). Runs it here when the thread cannot be started or has gone.
    pub(super) fn decide<T: Send + 'static>(
        &self,
        decide: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (answer_tx, answer_rx) = mpsc::sync_channel(1);
        let decide: Job = Box::new(move || {
            let _ = answer_tx.send(decide());
        });
        let decide = match self.send(decide) {
            Ok(()) => match answer_rx.recv() {
                Ok(answer) => return answer,
                // The job ended without an answer: the decision panicked (caught there).
                Err(_) => decision_panicked(),
            },
            Err(job) => job,
        };
        decide();
        answer_rx.recv().unwrap_or_else(|_| decision_panicked())
    }

    /// Hands `job` to the thread, starting it if it is not running; gives the job back when it
    /// cannot.
    fn send(&self, job: Job) -> Result<(), Job> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if jobs.is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("webhook-large-reviews".into())
                .spawn(move || {
                    for job in rx {
                        // A panicking policy is answered by the caller's own handling; the
                        // thread carries on with the next review.
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                    }
                });
            match started {
                Ok(_) => *jobs = Some(tx),
                Err(error) => {
                    tracing::warn!(%error, "cannot start the large-review thread; deciding in place");
                    return Err(job);
                }
            }
        }
        let Some(tx) = jobs.as_ref() else {
            return Err(job);
        };
        tx.send(job).map_err(|mpsc::SendError(job)| {
            *jobs = None;
            job
        })
    }
}

/// A decision that panicked on the large-review thread: the panic is re-raised here, where the
/// webhook answers a panicking policy.
fn decision_panicked<T>() -> T {
    panic!("the review's decision panicked on the large-review thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_reviews_are_decided_one_after_the_other_on_one_thread() {
        let large = std::sync::Arc::new(LargeReviews::new(100));
        assert!(large.is_large(25) && !large.is_large(24));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let large = large.clone();
                std::thread::spawn(move || large.decide(|| std::thread::current().id()))
            })
            .collect();
        let ids: std::collections::BTreeSet<String> = threads
            .into_iter()
            .map(|t| format!("{:?}", t.join().unwrap_or_else(|_| panic!("joined"))))
            .collect();
        assert_eq!(ids.len(), 1, "one thread decided them all: {ids:?}");
        assert!(!ids.contains(&format!("{:?}", std::thread::current().id())));
    }

    #[test]
    fn a_panicking_decision_panics_its_caller_and_the_thread_carries_on() {
        let large = LargeReviews::new(100);
        let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            large.decide(|| -> u8 { panic!("policy bug") })
        }));
        assert!(panicked.is_err());
        assert_eq!(large.decide(|| 7), 7);
    }
}
