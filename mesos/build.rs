//! Compiles the Mesos v1 protos with protox (pure Rust, no system protoc),
//! generates the prost messages, writes the descriptor set that
//! `DESCRIPTOR_POOL` embeds, and writes one `ReflectMessage` impl per message.

use std::fmt::Write as _;
use std::path::PathBuf;

use heck::{ToSnakeCase, ToUpperCamelCase};
use prost::Message as _;
use prost_types::{DescriptorProto, FileDescriptorSet};

/// The files we compile; their imports come along.
const PROTOS: &[&str] = &[
    "mesos/v1/mesos.proto",
    "mesos/v1/scheduler/scheduler.proto",
    "mesos/v1/executor/executor.proto",
    "mesos/v1/resource_provider/resource_provider.proto",
    "mesos/v1/allocator/allocator.proto",
    "mesos/v1/maintenance/maintenance.proto",
    "mesos/v1/quota/quota.proto",
    "mesos/v1/master/master.proto",
    "mesos/internal/messages.proto",
];

/// Rust module (under the crate root) of each proto package.
const PACKAGES: &[(&str, &str)] = &[
    ("mesos.v1", "crate::v1"),
    ("mesos.v1.scheduler", "crate::v1::scheduler"),
    ("mesos.v1.executor", "crate::v1::executor"),
    ("mesos.v1.resource_provider", "crate::v1::resource_provider"),
    ("mesos.v1.allocator", "crate::v1::allocator"),
    ("mesos.v1.maintenance", "crate::v1::maintenance"),
    ("mesos.v1.quota", "crate::v1::quota"),
    ("mesos.v1.master", "crate::v1::master"),
    ("mesos.internal", "crate::internal"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);

    let fds = protox::compile(PROTOS, ["proto"])?;
    std::fs::write(out.join("mesos_descriptors.bin"), fds.encode_to_vec())?;
    std::fs::write(out.join("mesos_reflect.rs"), reflect_impls(&fds)?)?;

    let mut config = prost_build::Config::new();
    // Maps in key order: a message encodes (and so writes its JSON) the same
    // way every time, as a HashMap's random order would not.
    config.btree_map(["."]);
    for field in fields_to_box(&fds) {
        config.boxed(field);
    }
    for field in ALSO_BOXED {
        config.boxed(field);
    }
    config.compile_fds(fds)?;
    Ok(())
}

/// A singular message field whose message is larger than this (estimated)
/// is boxed: proto2 keeps optional sub-messages inline, and without boxes a
/// `Resource` (its `DiskInfo` inline, and that one's `Volume`, ...) is over a
/// kilobyte that every clone and move copies.
const BOX_ABOVE: usize = 192;

/// Fields boxed although small, because they are nearly always unset in a
/// type held by the ten thousand (a `Resource` is in every offer twice):
/// the pre-refinement reservation (turned into `reservations` when a
/// resource comes in) and the resource provider's id (set only on a
/// provider's resources). Boxed, a `Resource` is 88 bytes smaller.
const ALSO_BOXED: &[&str] = &[
    ".mesos.v1.Resource.reservation",
    ".mesos.v1.Resource.provider_id",
];

/// Paths (`.package.Message.field`) of the singular message fields to box,
/// in package `mesos.v1` only: the types held and cloned in numbers
/// (resources, tasks, statuses). The API envelopes (`Call`, `Event` and their
/// payloads) are made and moved once each and keep their plain fields.
fn fields_to_box(fds: &FileDescriptorSet) -> Vec<String> {
    let mut messages: std::collections::HashMap<String, &DescriptorProto> = Default::default();
    fn collect<'a>(
        scope: &str,
        m: &'a DescriptorProto,
        out: &mut std::collections::HashMap<String, &'a DescriptorProto>,
    ) {
        let name = format!("{scope}.{}", m.name());
        for nested in &m.nested_type {
            collect(&name, nested, out);
        }
        out.insert(name, m);
    }
    for file in &fds.file {
        for m in &file.message_type {
            collect(&format!(".{}", file.package()), m, &mut messages);
        }
    }
    let mut sizes: std::collections::HashMap<String, usize> = Default::default();
    let mut boxed = Vec::new();
    let mut names: Vec<&String> = messages.keys().collect();
    names.sort();
    for name in names {
        let m = messages[name];
        let package_v1 = messages_package(name) == ".mesos.v1";
        for f in m.field.iter().filter(|_| package_v1) {
            let singular = f.label() != prost_types::field_descriptor_proto::Label::Repeated;
            if singular
                && f.r#type() == prost_types::field_descriptor_proto::Type::Message
                && estimate(f.type_name(), &messages, &mut sizes, &mut Vec::new()) > BOX_ABOVE
            {
                boxed.push(format!("{name}.{}", f.name()));
            }
        }
    }
    boxed
}

/// The package of a message path: its leading lower-case components.
fn messages_package(name: &str) -> String {
    name.split('.')
        .filter(|p| !p.is_empty())
        .take_while(|p| p.starts_with(|c: char| c.is_ascii_lowercase()))
        .fold(String::new(), |acc, p| format!("{acc}.{p}"))
}

/// Rough inline size of a message's Rust struct, counting boxed fields as a
/// pointer; cycles count as a pointer (prost boxes them).
fn estimate(
    name: &str,
    messages: &std::collections::HashMap<String, &DescriptorProto>,
    sizes: &mut std::collections::HashMap<String, usize>,
    visiting: &mut Vec<String>,
) -> usize {
    use prost_types::field_descriptor_proto::{Label, Type};
    if let Some(&s) = sizes.get(name) {
        return s;
    }
    let Some(m) = messages.get(name) else {
        return 24; // A well-known type.
    };
    if visiting.iter().any(|v| v == name) {
        return 8;
    }
    visiting.push(name.to_string());
    let mut total = 0;
    for f in &m.field {
        total += match (f.label(), f.r#type()) {
            (Label::Repeated, _) => 24,
            (_, Type::Message) => {
                let inner = estimate(f.type_name(), messages, sizes, visiting);
                if inner > BOX_ABOVE { 8 } else { inner + 8 }
            }
            (_, Type::String | Type::Bytes) => 24,
            _ => 8,
        };
    }
    visiting.pop();
    sizes.insert(name.to_string(), total);
    total
}

/// One `ReflectMessage` impl per generated message, looking its descriptor up
/// by full name in the embedded pool.
fn reflect_impls(fds: &FileDescriptorSet) -> Result<String, String> {
    let mut code = String::new();
    for file in &fds.file {
        let package = file.package();
        if package.starts_with("google.") {
            continue; // Well-known types map onto prost-types.
        }
        let module = PACKAGES
            .iter()
            .find(|(p, _)| *p == package)
            .map(|(_, m)| *m)
            .ok_or_else(|| format!("no Rust module for package {package}"))?;
        for message in &file.message_type {
            impls_for(message, package, module, &mut code);
        }
    }
    Ok(code)
}

fn impls_for(message: &DescriptorProto, proto_scope: &str, rust_scope: &str, code: &mut String) {
    if message.options.as_ref().is_some_and(|o| o.map_entry()) {
        return; // Map entries have no Rust type.
    }
    let full_name = format!("{proto_scope}.{}", message.name());
    let rust_path = format!(
        "{rust_scope}::{}",
        ident(&message.name().to_upper_camel_case())
    );
    writeln!(
        code,
        "impl ::prost_reflect::ReflectMessage for {rust_path} {{\n    \
         fn descriptor(&self) -> ::prost_reflect::MessageDescriptor {{\n        \
         crate::message_descriptor(\"{full_name}\")\n    }}\n}}"
    )
    .expect("writing to a String");
    let nested_scope = format!("{rust_scope}::{}", ident(&message.name().to_snake_case()));
    for nested in &message.nested_type {
        impls_for(nested, &full_name, &nested_scope, code);
    }
}

/// The identifier prost-build gives a name (keywords become raw identifiers
/// or get a trailing underscore).
fn ident(name: &str) -> String {
    match name {
        "as" | "break" | "const" | "continue" | "else" | "enum" | "false" | "fn" | "for" | "if"
        | "impl" | "in" | "let" | "loop" | "match" | "mod" | "move" | "mut" | "pub" | "ref"
        | "return" | "static" | "struct" | "trait" | "true" | "type" | "unsafe" | "use"
        | "where" | "while" | "dyn" | "abstract" | "become" | "box" | "do" | "final" | "macro"
        | "override" | "priv" | "typeof" | "unsized" | "virtual" | "yield" | "async" | "await"
        | "try" | "gen" => format!("r#{name}"),
        "_" | "super" | "self" | "Self" | "extern" | "crate" => format!("{name}_"),
        _ => name.to_string(),
    }
}
