//! Giving freed memory back to the system after a burst of work.
//!
//! glibc's malloc keeps what a program frees for its next allocations and returns to the system
//! only a free stretch at the top of its heap. After a burst (the detector compiling its rules,
//! the drainer's first decision round over every node), the freed memory lies between blocks that
//! live on, so it stays in the process's RSS for good: 340 KiB of the detector's idle 8 MiB, several
//! MiB of the drainer's after it synced. [`give_back`] asks malloc to return every free page it holds
//! (`malloc_trim(0)`, which madvises them away), once, after such a burst. Elsewhere (another libc,
//! another OS) it does nothing.

/// Return the allocator's free pages to the system; how much the process's RSS fell, in KiB, when
/// that is known (for the log line that says it was done).
pub fn give_back() -> Option<u64> {
    let before = rss_kib();
    trim();
    Some(before?.saturating_sub(rss_kib()?))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim() {
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own heap under its locks; it is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn freed_memory_between_live_blocks_goes_back_to_the_system() {
        // Many blocks of a few pages, every other one freed: the free half lies between live
        // blocks, where malloc keeps it.
        let mut blocks: Vec<Option<Vec<u8>>> =
            (0..2_000).map(|_| Some(vec![1u8; 16 * 1024])).collect();
        for b in blocks.iter_mut().step_by(2) {
            *b = None;
        }
        let fell = super::give_back();
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            let fell = fell.expect("RSS is read from /proc");
            // 16 MB freed in 16 KiB pieces; at least a quarter of it comes back as whole pages
            // (other tests' threads allocate meanwhile, so not an exact figure).
            assert!(fell >= 4 * 1024, "RSS fell by {fell} KiB");
        }
        drop(blocks);
    }
}
