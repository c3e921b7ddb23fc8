//! The HTML report (placeholder).
use super::figures::Figures;
/// Renders the report.
pub fn render(f: &Figures) -> String {
    format!(
        "<html><body><pre>{}</pre></body></html>",
        super::report::summary(f)
    )
}
