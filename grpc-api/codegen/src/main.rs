//! Compiles the vendored apache/rocketmq-apis v2 protos (no system `protoc`: protox parses them)
//! into `grpc-api/src/generated/`. Usage: `rmq-grpc-api-codegen <grpc-api dir>`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: rmq-grpc-api-codegen <grpc-api dir>")?;
    let proto_dir = root.join("proto");
    let out_dir = root.join("src").join("generated");
    let files = [
        "apache/rocketmq/v2/definition.proto",
        "apache/rocketmq/v2/service.proto",
        "apache/rocketmq/v2/admin.proto",
    ];
    let fds = protox::compile(files, [&proto_dir])?;
    std::fs::create_dir_all(&out_dir)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // The generated client takes any tower service; the transport (and TLS) is the caller's.
        .build_transport(false)
        .out_dir(&out_dir)
        .compile_fds(fds)?;
    Ok(())
}
