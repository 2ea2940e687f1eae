//! Link the `drainer` binary with packed relative relocations (`-z pack-relative-relocs`, DT_RELR).
//!
//! Why: the drainer is a position-independent executable, and most of its ~60,000 relocations are
//! relative ones (pointers in vtables, string slices and panic locations). As RELA entries they take
//! 1.4 MB that the loader reads at every start, and those pages then stay in the process's RSS for
//! its whole life; packed, the same relocations take a few KiB. The binary stays a PIE (ASLR kept).
//! It needs glibc 2.36 at run time (the image is distroless cc-debian12) and binutils 2.38 or lld
//! to link; `NODEMEDIC_NO_RELR=1` links the old way for an older toolchain.

fn main() {
    println!("cargo:rerun-if-env-changed=NODEMEDIC_NO_RELR");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var_os("NODEMEDIC_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
