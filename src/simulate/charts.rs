//! Charts of the report (placeholder until drawn).
