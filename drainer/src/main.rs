//! `drainer`: the binary, a shell. Everything it does is in the library's `cli` module (so it is tested and
//! documented there); this hands it the process's arguments and returns its exit code.

fn main() -> std::process::ExitCode {
    nodemedic_drainer::cli::main(std::env::args_os().collect())
}
