//! Resources.
