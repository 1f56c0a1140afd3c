//! Locating the workspace's built binaries from a test executable.

use std::path::PathBuf;

/// Path of binary `name` in the same target profile directory as the running test:
/// `.../target/<profile>/deps/<test>` → `.../target/<profile>/<name>`. The environment
/// variable `RMQ_BIN_DIR` overrides the directory.
pub fn path(name: &str) -> PathBuf {
    let dir = match std::env::var_os("RMQ_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().expect("current_exe of the test binary");
            let deps = exe.parent().expect("test binary has a parent directory");
            // Integration tests live in deps/; be lenient if a runner moved them.
            if deps.file_name().is_some_and(|n| n == "deps") {
                deps.parent().expect("deps has a parent").to_path_buf()
            } else {
                deps.to_path_buf()
            }
        }
    };
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "binary {} not found; build it first with `cargo build --workspace --bins` \
         (same profile and CARGO_TARGET_DIR as the tests), or set RMQ_BIN_DIR",
        bin.display()
    );
    bin
}
