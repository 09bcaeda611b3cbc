//! Text that came from a component, a tenants file or the network, made safe to show an
//! operator: control characters escaped, an error kept to one line. The host's own rules,
//! so the binary prints them as the host logs them.

pub use ruststream_common::escape::{escape_controls, one_line_within, quote};
