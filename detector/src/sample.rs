//! A deterministic, realistic kernel log for benchmarks and demos: mostly benign lines of the shapes a
//! busy Kubernetes node prints (veth/cni churn, audit, EXT4 mounts, hrtimer, TCP), with about one line
//! in `1 / problem_every` matching a default rule (OOM kills, hung tasks, I/O errors).

/// Small xorshift generator: same output on every machine, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BENIGN: &[&str] = &[
    "cni0: port {a}(veth{h}) entered blocking state",
    "cni0: port {a}(veth{h}) entered disabled state",
    "device veth{h} entered promiscuous mode",
    "cni0: port {a}(veth{h}) entered forwarding state",
    "IPv6: ADDRCONF(NETDEV_CHANGE): veth{h}: link becomes ready",
    "audit: type=1400 audit({a}.{b}:{c}): apparmor=\"STATUS\" operation=\"profile_load\" profile=\"unconfined\" name=\"cri-containerd.apparmor.d\" pid={c} comm=\"apparmor_parser\"",
    "EXT4-fs (dm-{a}): mounted filesystem {h} with ordered data mode. Quota mode: none.",
    "hrtimer: interrupt took {c} ns",
    "TCP: request_sock_TCP: Possible SYN flooding on port {b}. Sending cookies.  Check SNMP counters.",
    "overlayfs: fs on '/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/{c}/fs' does not support file handles, falling back to xino=off.",
    "IPVS: rr: TCP 10.96.{a}.{b}:443 - no destination available",
    "nf_conntrack: nf_conntrack: table full, dropping packet",
];

const PROBLEMS: &[&str] = &[
    "Out of memory: Killed process {c} (java) total-vm:{c}kB, anon-rss:{c}kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:{b}kB oom_score_adj:{a}",
    "INFO: task kworker/{a}:{b}:{c} blocked for more than 120 seconds.",
    "Buffer I/O error on dev sd{a}, logical block {c}, async page read",
];

fn fill(template: &str, rng: &mut Rng) -> String {
    let a = rng.below(16).to_string();
    let b = rng.below(65536).to_string();
    let c = (rng.below(900_000) + 100_000).to_string();
    let h = format!("{:08x}", rng.next() as u32);
    template
        .replace("{a}", &a)
        .replace("{b}", &b)
        .replace("{c}", &c)
        .replace("{h}", &h)
}

/// Write `lines` kmsg records to `out`; returns the number of problem lines written.
pub fn write_kmsg(
    out: &mut impl std::io::Write,
    lines: u64,
    problem_every: u64,
    seed: u64,
) -> std::io::Result<u64> {
    let mut rng = Rng(seed | 1);
    let mut problems = 0;
    let mut ts: u64 = 5_000_000;
    for seq in 0..lines {
        ts += rng.below(20_000);
        let (pri, msg) = if rng.below(problem_every) == 0 {
            problems += 1;
            (
                3,
                fill(
                    PROBLEMS[rng.below(PROBLEMS.len() as u64) as usize],
                    &mut rng,
                ),
            )
        } else {
            (
                6,
                fill(BENIGN[rng.below(BENIGN.len() as u64) as usize], &mut rng),
            )
        };
        writeln!(out, "{pri},{seq},{ts},-;{msg}")?;
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    #[test]
    fn is_deterministic_and_mostly_benign() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let pa = super::write_kmsg(&mut a, 20_000, 100, 7).unwrap();
        super::write_kmsg(&mut b, 20_000, 100, 7).unwrap();
        assert_eq!(a, b);
        assert!((100..=300).contains(&pa), "{pa}");
    }
}
