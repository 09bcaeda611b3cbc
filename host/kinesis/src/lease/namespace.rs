//! Naming a namespace's lease table from a template, so that no two (tenant, app) pairs ever
//! share one.
//!
//! Tenant and app names are made of `[A-Za-z0-9_.-]`, so `acme` + `eu-ledger` and `acme-eu` +
//! `ledger` would both fill `ruststream-{tenant}-{app}` as `ruststream-acme-eu-ledger`: two
//! tenants taking each other's leases and skipping each other's records. Each name is therefore
//! escaped so that it holds no `-` (`.` becomes `..`, `-` becomes `._`), and the template must
//! put a `-` between the two placeholders: the first `-` after the first placeholder then marks
//! where its name ends, so the mapping is injective. Names without `.` or `-` are unchanged.

/// The placeholders of a table template.
pub(crate) const TENANT_PLACEHOLDER: &str = "{tenant}";
pub(crate) const APP_PLACEHOLDER: &str = "{app}";

/// The default template: one table per tenant's app.
pub const DEFAULT_TABLE_TEMPLATE: &str = "ruststream-{tenant}-{app}";

/// Why a lease table template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A placeholder is missing though the host needs it to keep namespaces apart.
    #[error(
        "lease table template `{template}` has no `{placeholder}` placeholder, but {reason}: \
         they would share one table and take each other's leases"
    )]
    MissingPlaceholder {
        /// The template.
        template: String,
        /// The placeholder it lacks.
        placeholder: &'static str,
        /// Why it is needed.
        reason: String,
    },
    /// A placeholder appears more than once.
    #[error("lease table template `{0}` has a placeholder more than once")]
    Repeated(String),
    /// `{tenant}` and `{app}` are not separated by a `-`.
    #[error(
        "lease table template `{0}` needs a `-` between `{{tenant}}` and `{{app}}`, so that no \
         two tenant and app names fill it the same way"
    )]
    NoSeparator(String),
    /// The template holds characters a table name may not, or is too long.
    #[error(
        "lease table template `{0}`: besides the placeholders, a DynamoDB table name may hold \
         only [A-Za-z0-9_.-] (and at most 128 of them here)"
    )]
    Characters(String),
}

/// A checked lease table template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTemplate(String);

impl TableTemplate {
    /// Checks `template` for a host running `tenants` tenants, the busiest of which runs
    /// `apps_per_tenant` apps: each shared dimension needs its placeholder.
    ///
    /// # Errors
    /// A missing or repeated placeholder, no `-` between the two, or characters a table name
    /// cannot hold.
    pub fn new(
        template: &str,
        tenants: usize,
        apps_per_tenant: usize,
    ) -> Result<Self, TemplateError> {
        let count = |placeholder| template.matches(placeholder).count();
        let (tenant, app) = (count(TENANT_PLACEHOLDER), count(APP_PLACEHOLDER));
        if tenant > 1 || app > 1 {
            return Err(TemplateError::Repeated(template.to_owned()));
        }
        let missing = |placeholder, reason: String| TemplateError::MissingPlaceholder {
            template: template.to_owned(),
            placeholder,
            reason,
        };
        if tenant == 0 && tenants > 1 {
            return Err(missing(
                TENANT_PLACEHOLDER,
                format!("{tenants} tenants share this host"),
            ));
        }
        if app == 0 && apps_per_tenant > 1 {
            return Err(missing(
                APP_PLACEHOLDER,
                format!("a tenant runs {apps_per_tenant} apps"),
            ));
        }
        if tenant == 1 && app == 1 && !separated(template) {
            return Err(TemplateError::NoSeparator(template.to_owned()));
        }
        let literal = template
            .replace(TENANT_PLACEHOLDER, "")
            .replace(APP_PLACEHOLDER, "");
        let valid = literal
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !valid || literal.len() > 128 {
            return Err(TemplateError::Characters(template.to_owned()));
        }
        Ok(Self(template.to_owned()))
    }

    /// The table of `tenant`'s app `app`.
    pub fn table(&self, tenant: &str, app: &str) -> String {
        self.0
            .replace(TENANT_PLACEHOLDER, &escape(tenant))
            .replace(APP_PLACEHOLDER, &escape(app))
    }
}

/// Whether the text between the two placeholders holds a `-`.
fn separated(template: &str) -> bool {
    let (Some(tenant), Some(app)) = (
        template.find(TENANT_PLACEHOLDER),
        template.find(APP_PLACEHOLDER),
    ) else {
        return false;
    };
    let between = if tenant < app {
        &template[tenant + TENANT_PLACEHOLDER.len()..app]
    } else {
        &template[app + APP_PLACEHOLDER.len()..tenant]
    };
    between.contains('-')
}

/// A name with no `-` in it, from which the name can be read back.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        match c {
            '.' => out.push_str(".."),
            '-' => out.push_str("._"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_and_apps_with_dashes_never_share_a_table() -> Result<(), TemplateError> {
        let template = TableTemplate::new(DEFAULT_TABLE_TEMPLATE, 2, 1)?;
        let a = template.table("acme", "eu-ledger");
        let b = template.table("acme-eu", "ledger");
        assert_ne!(a, b);
        assert_eq!(template.table("acme", "ledger"), "ruststream-acme-ledger");
        // Every split of the same characters maps apart.
        let names = [
            "a", "a-", "-a", "a-b", "a.b", "a._b", "a..", "_", "a-_", "_b",
        ];
        let mut seen = std::collections::HashMap::new();
        for tenant in names {
            for app in names {
                let table = template.table(tenant, app);
                if let Some(other) = seen.insert(table.clone(), (tenant, app)) {
                    panic!("{other:?} and {:?} share {table}", (tenant, app));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn templates_that_would_collide_are_refused() {
        let refused = |t: &str, tenants, apps| TableTemplate::new(t, tenants, apps).is_err();
        assert!(refused("ruststream-{app}", 2, 1), "tenants share it");
        assert!(!refused("ruststream-{app}", 1, 1), "one tenant alone");
        assert!(refused("ruststream-{tenant}", 1, 2), "apps share it");
        assert!(refused("ruststream-{tenant}{app}", 2, 2), "no separator");
        assert!(refused("ruststream-{tenant}.{app}", 2, 2), "no separator");
        assert!(refused("x-{tenant}-{tenant}-{app}", 2, 2), "repeated");
        assert!(refused("leases {tenant}-{app}", 2, 2), "a space");
        assert!(!refused("{app}-{tenant}", 2, 2));
    }
}
