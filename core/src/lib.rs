//! The unisched scheduling core.
