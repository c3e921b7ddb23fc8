//! Queue configuration: the YAML schema, parsing and validation.
