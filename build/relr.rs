//! The build script of the `drainer` and the `detector`: link their binaries with packed relative
//! relocations (`-z pack-relative-relocs`, DT_RELR).
//!
//! Why: both are position-independent executables, and most of their relocations (~60,000 in the
//! drainer, ~15,000 in the detector) are relative ones (pointers in vtables, string slices and panic
//! locations). As RELA entries they take 1.4 MB and 350 KB that the loader reads at every start, and
//! those pages then stay in the process's RSS for its whole life; packed, the same relocations take
//! a few KiB. The binaries stay PIEs (ASLR kept). They need glibc 2.36 at run time (the images are
//! distroless cc-debian12 and debian bookworm) and binutils 2.38 or lld to link;
//! `NODEMEDIC_NO_RELR=1` links the old way, for an older toolchain or a binary meant for an older
//! host.

fn main() {
    println!("cargo:rerun-if-env-changed=NODEMEDIC_NO_RELR");
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu && std::env::var_os("NODEMEDIC_NO_RELR").is_none() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
