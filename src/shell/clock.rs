//! The reading budget counts the CPU time a reading spends on its own
//! thread, not the wall clock: on a loaded machine a thread that waits for a
//! core would otherwise run out of budget on a 20 µs command and make it
//! opaque. Work is what the budget bounds (§25.10: "a parse that exceeds its
//! budget"); a reading never blocks, so its CPU time is its work.

use std::time::Duration;

/// CPU time this thread has used, when the system can tell (Linux and the
/// other POSIX systems this worker runs on can); `None` otherwise.
fn thread_cpu() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through a pointer to a
    // live, properly aligned local and reads nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(now.tv_sec).ok()?;
    let nanos = u32::try_from(now.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

/// One reading's budget, started when the reading starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// The thread's CPU time at the start, or the wall clock's instant when
    /// the thread's CPU time cannot be read.
    start: Start,
    limit: Duration,
}

#[derive(Debug, Clone, Copy)]
enum Start {
    Cpu(Duration),
    Wall(std::time::Instant),
}

impl Budget {
    /// A budget of `limit`, from now, on this thread.
    pub(super) fn start(limit: Duration) -> Budget {
        let start = match thread_cpu() {
            Some(cpu) => Start::Cpu(cpu),
            None => Start::Wall(std::time::Instant::now()),
        };
        Budget { start, limit }
    }

    /// Whether the reading has spent more than its budget.
    pub(super) fn spent(&self) -> bool {
        let used = match self.start {
            Start::Cpu(at) => thread_cpu().map_or(self.limit, |now| now.saturating_sub(at)),
            Start::Wall(at) => at.elapsed(),
        };
        used > self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_counts_work_not_sleep() {
        let budget = Budget::start(Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!budget.spent(), "sleeping spends no CPU time");
        let mut x = 0u64;
        let spinning = Budget::start(Duration::from_millis(5));
        while !spinning.spent() {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
    }
}
