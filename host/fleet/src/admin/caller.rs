//! Who sent an admin request: the token it carried, named by its id, never by its secret.

/// The caller of an admin request, as the guard found its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's id, as the audit trail names it: [`Caller::OPERATOR`] for the host's admin
    /// token.
    pub token_id: String,
    /// The tenant a tenant token reaches; none for the operator, who reaches all.
    pub tenant: Option<String>,
}

impl Caller {
    /// The id of the host's admin token, which reaches every tenant.
    pub const OPERATOR: &str = "operator";

    /// The holder of the host's admin token.
    pub fn operator() -> Self {
        Self {
            token_id: Self::OPERATOR.to_owned(),
            tenant: None,
        }
    }

    /// Whether the caller may reach `tenant`.
    pub fn reaches(&self, tenant: &str) -> bool {
        self.tenant.as_deref().is_none_or(|own| own == tenant)
    }
}
