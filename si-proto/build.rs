//! Compiles `si.proto` with protox (pure Rust, no system protoc) and generates
//! the prost messages and tonic services.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=si.proto");
    let fds = protox::compile(["si.proto"], ["."])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
