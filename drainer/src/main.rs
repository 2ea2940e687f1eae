//! The nodemedic drainer is not built yet; it is the subject of its own issue ("The drainer, end to end").
//! This placeholder exists so the workspace layout is final and so that nobody mistakes it for a working binary.

fn main() {
    eprintln!("drainer: not implemented yet (see the drainer issue); nothing was done");
    std::process::exit(2);
}
