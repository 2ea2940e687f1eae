//! The floor under the scale bench's steady figure: what any process on this machine pays to be
//! woken for one node update and read it, before doing anything with it. A sender writes one
//! kubelet-sized watch line (4.5 KB) every 50 ms over loopback TCP, as the scale bench's steady
//! phase does; the reader's thread CPU per line is measured twice: a blocking `read`, and a tokio
//! current-thread runtime's wake-up and read (as the drainer's runtime is built). The drainer's
//! steady figure minus this floor is its own work per update (HTTP, decoding, the cache).
//!
//! `cargo bench -p nodemedic-drainer --bench wakeup` (`WAKEUP_UPDATES`, default 400: 20 s a reader)

use nodemedic_tests::bench::thread_cpu;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

const LINE: usize = 4540;
const EVERY: Duration = Duration::from_millis(50);

/// A loopback connection whose far end writes `updates + 1` lines, one every 50 ms.
fn feed(updates: usize) -> (TcpStream, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let sender = std::thread::spawn(move || {
        let (mut to, _) = listener.accept().expect("the reader connects");
        let mut line = vec![b'x'; LINE - 1];
        line.push(b'\n');
        let mut next = Instant::now();
        for _ in 0..=updates {
            to.write_all(&line).expect("the reader reads");
            next += EVERY;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
    });
    let from = TcpStream::connect(addr).expect("connect over loopback");
    (from, sender)
}

/// Lines read and the thread CPU since the first (so the connection's set-up is not counted).
struct Tally {
    lines: usize,
    start: Option<Duration>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            lines: 0,
            start: None,
        }
    }

    /// Count what one read returned.
    fn read(&mut self, bytes: &[u8]) {
        assert!(!bytes.is_empty(), "the sender closed early");
        let seen = bytes.iter().filter(|&&b| b == b'\n').count();
        match self.start {
            None if seen > 0 => (self.start, self.lines) = (Some(thread_cpu()), seen - 1),
            None => {}
            Some(_) => self.lines += seen,
        }
    }

    fn per_line(&self) -> Duration {
        (thread_cpu() - self.start.expect("a first line")) / self.lines as u32
    }
}

/// Thread CPU per line for `updates` lines, read with a blocking `read`.
fn blocking(updates: usize) -> Duration {
    let (mut from, sender) = feed(updates);
    let mut buf = vec![0u8; 1 << 16];
    let mut tally = Tally::new();
    while tally.lines < updates {
        let n = from.read(&mut buf).expect("a read");
        tally.read(&buf[..n]);
    }
    let per_line = tally.per_line();
    sender.join().expect("the sender");
    per_line
}

/// The same on a tokio current-thread runtime.
fn runtime(updates: usize) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (from, sender) = feed(updates);
    from.set_nonblocking(true).expect("non-blocking");
    let per_line = rt.block_on(async move {
        use tokio::io::AsyncReadExt;
        let mut from = tokio::net::TcpStream::from_std(from).expect("a tokio stream");
        let mut buf = vec![0u8; 1 << 16];
        let mut tally = Tally::new();
        while tally.lines < updates {
            let n = from.read(&mut buf).await.expect("a read");
            tally.read(&buf[..n]);
        }
        tally.per_line()
    });
    sender.join().expect("the sender");
    per_line
}

fn main() {
    let updates: usize = match std::env::var("WAKEUP_UPDATES").ok().map(|s| s.parse()) {
        None => 400,
        Some(Ok(n)) if (10..=100_000).contains(&n) => n,
        Some(_) => {
            eprintln!("WAKEUP_UPDATES must be a number from 10 to 100000");
            std::process::exit(2);
        }
    };
    let secs = updates as u64 * EVERY.as_millis() as u64 / 1000;
    println!(
        "one {LINE}-byte line every {EVERY:?} over loopback TCP, {updates} lines ({secs} s) a reader; thread CPU per line:"
    );
    let b = blocking(updates);
    println!(
        "  blocking read:                          {:.1} us",
        b.as_secs_f64() * 1e6
    );
    let r = runtime(updates);
    println!(
        "  tokio current-thread wake-up and read:  {:.1} us",
        r.as_secs_f64() * 1e6
    );
}
