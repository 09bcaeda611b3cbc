//! The phases of loading a component, which a refusal names: read, checked, compiled, linked,
//! instantiated, described, its declaration validated.

use std::fmt;

/// The phases of loading a component, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPhase {
    /// Reading the file.
    Read,
    /// Checking it is a RustStream component of this contract, with granted imports.
    Check,
    /// Size bounds and compiling (in the bounded worker, or from the artifact cache).
    Compile,
    /// Linking its imports to the host's.
    Link,
    /// Instantiating it (start functions and constructors run), under the tenant's limits.
    Instantiate,
    /// Calling `describe`, under the tenant's limits.
    Describe,
    /// Validating what `describe` declared.
    Declaration,
}

impl fmt::Display for LoadPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Read => "reading",
            Self::Check => "checking",
            Self::Compile => "compiling",
            Self::Link => "linking",
            Self::Instantiate => "instantiation",
            Self::Describe => "`describe`",
            Self::Declaration => "declaration",
        })
    }
}
