//! Who sent an admin request: the token it carried, named by its id, never by its secret.

/// The caller of an admin request, as the guard found its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's id, as the audit trail names it: [`Caller::OPERATOR`] for the host's admin
    /// token.
    pub token_id: String,
}

impl Caller {
    /// The id of the host's admin token, which reaches every tenant.
    pub const OPERATOR: &str = "operator";

    /// The holder of the host's admin token.
    pub fn operator() -> Self {
        Self {
            token_id: Self::OPERATOR.to_owned(),
        }
    }
}
