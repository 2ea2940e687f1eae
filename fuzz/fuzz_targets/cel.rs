#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| nodemedic_fuzz::run("cel", data));
