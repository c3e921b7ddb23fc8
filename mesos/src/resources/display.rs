//! How resources read as text: compact, and in the agent text format where
//! that can say it, so the display of simple resources parses back.

use std::fmt;
use std::fmt::Write as _;

use super::{Resources, allocation_role, kind};
use crate::v1::{self, Resource};

impl fmt::Display for Resources {
    /// `cpus:2; mem:1024; ports:[31000-32000]`, `cpus(role):1` for a plain
    /// static reservation (the text format, so it parses back), and Mesos'
    /// annotations for the rest (`(allocated: r)`, `(reservations: [...])`,
    /// `[disk]`, `{REV}`, `<SHARED>`); `{}` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("{}");
        }
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&resource(&entry.resource, entry.shared_count))?;
        }
        Ok(())
    }
}

/// One resource as [`Resources`] displays it.
#[allow(deprecated)] // Shows the legacy `role` of resources not yet upgraded.
pub(super) fn resource(r: &Resource, shared_count: Option<i64>) -> String {
    let mut out = r.name.clone();
    if let Some(role) = allocation_role(r) {
        let _ = write!(out, "(allocated: {role})");
    }
    let plain_static = |res: &v1::resource::ReservationInfo| {
        res.r#type() == v1::resource::reservation_info::Type::Static
            && res.principal.is_none()
            && res.labels.is_none()
    };
    match &r.reservations[..] {
        [] => match r.role.as_deref() {
            Some(role) if role != "*" => {
                let _ = write!(out, "({role})");
            }
            _ => {}
        },
        [only] if plain_static(only) => {
            let _ = write!(out, "({})", only.role());
        }
        stack => {
            let parts: Vec<String> = stack.iter().map(reservation_text).collect();
            let _ = write!(out, "(reservations: [{}])", parts.join(", "));
        }
    }
    if let Some(disk) = &r.disk {
        let _ = write!(out, "[{}]", disk_text(disk));
    }
    if r.revocable.is_some() {
        out.push_str("{REV}");
    }
    if r.shared.is_some() {
        out.push_str("<SHARED>");
    }
    out.push(':');
    match r.r#type() {
        v1::value::Type::Scalar => {
            let _ = write!(out, "{}", kind::scalar(r));
        }
        v1::value::Type::Ranges => {
            let parts: Vec<String> = kind::ranges(r)
                .iter()
                .map(|x| format!("{}-{}", x.begin, x.end))
                .collect();
            let _ = write!(out, "[{}]", parts.join(", "));
        }
        v1::value::Type::Set => {
            let _ = write!(out, "{{{}}}", kind::items(r).join(", "));
        }
        v1::value::Type::Text => {}
    }
    if let Some(count) = shared_count {
        let _ = write!(out, "<{count}>");
    }
    out
}

fn reservation_text(res: &v1::resource::ReservationInfo) -> String {
    let mut out = format!("({},{}", res.r#type().as_str_name(), res.role());
    if let Some(principal) = &res.principal {
        out.push(',');
        out.push_str(principal);
    }
    if let Some(labels) = &res.labels {
        out.push(',');
        out.push_str(&labels_text(labels));
    }
    out.push(')');
    out
}

fn labels_text(labels: &v1::Labels) -> String {
    let parts: Vec<String> = labels
        .labels
        .iter()
        .map(|l| match &l.value {
            Some(v) => format!("{}: {v}", l.key),
            None => l.key.clone(),
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn disk_text(disk: &v1::resource::DiskInfo) -> String {
    let mut out = String::new();
    if let Some(source) = &disk.source {
        out.push_str(source.r#type().as_str_name());
        if source.id.is_some() || source.profile.is_some() {
            out.push_str(&format!(
                "({},{},{})",
                source.vendor(),
                source.id(),
                source.profile()
            ));
        } else {
            let root = source
                .mount
                .as_ref()
                .and_then(|m| m.root.as_deref())
                .or_else(|| source.path.as_ref().and_then(|p| p.root.as_deref()));
            if let Some(root) = root {
                out.push(':');
                out.push_str(root);
            }
        }
    }
    if let Some(persistence) = &disk.persistence {
        if disk.source.is_some() {
            out.push(',');
        }
        out.push_str(&persistence.id);
    }
    if let Some(volume) = &disk.volume {
        out.push(':');
        if let Some(host) = &volume.host_path {
            out.push_str(host);
            out.push(':');
        }
        out.push_str(&volume.container_path);
    }
    out
}
