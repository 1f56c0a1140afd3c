#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| protocol::fuzz::json_header(data));
