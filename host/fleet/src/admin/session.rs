//! The console's sign-in: a token given once (`POST /ui/session`) opens a session, carried by
//! an `HttpOnly`, `SameSite=Strict` cookie the page's script cannot read, and every change
//! asked in a session carries the session's CSRF token in `X-CSRF-Token`, which only the
//! page that signed in knows. The token itself is kept in no cookie and no page: a session
//! names the caller it was opened for (the operator, or a tenant token by id, looked up again
//! at every request so that a revoked token ends its sessions).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use ruststream_runtime::sync::lock;
use subtle::ConstantTimeEq as _;

use crate::admin::caller::Caller;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "ruststream_session";
/// The header a change asked in a session carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts without a request.
const IDLE: Duration = Duration::from_secs(30 * 60);
/// Sessions kept at most: signing in past it ends the least recently used.
const MAX_SESSIONS: usize = 1024;

/// One signed-in page.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Who signed in.
    pub caller: Caller,
    /// What the page sends back with every change.
    pub csrf: String,
    last_used: Instant,
}

/// The sessions of one host (a console signs in to the host it is served by).
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// Opens a session for `caller`; returns its id (the cookie's value) and CSRF token.
    ///
    /// # Errors
    /// The OS gave no random bytes.
    pub(crate) fn open(&self, caller: Caller) -> Result<(String, String), String> {
        let (id, csrf) = (random_hex()?, random_hex()?);
        let mut open = lock(&self.open);
        open.retain(|_, session| session.last_used.elapsed() < IDLE);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = (open.iter())
                .min_by_key(|(_, session)| session.last_used)
                .map(|(id, _)| id.clone())
        {
            open.remove(&oldest);
        }
        let session = Session {
            caller,
            csrf: csrf.clone(),
            last_used: Instant::now(),
        };
        open.insert(id.clone(), session);
        Ok((id, csrf))
    }

    /// The session `id` names, if open (and marks it used).
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let mut open = lock(&self.open);
        let session = open.get_mut(id)?;
        if session.last_used.elapsed() >= IDLE {
            open.remove(id);
            return None;
        }
        session.last_used = Instant::now();
        Some(session.clone())
    }

    /// Ends session `id`.
    pub(crate) fn close(&self, id: &str) {
        lock(&self.open).remove(id);
    }
}

/// The session id a request's cookie carries.
pub(crate) fn session_id(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get(axum::http::header::COOKIE)?.to_str().ok()?;
    cookie(header, COOKIE)
}

/// Whether `presented` is `session`'s CSRF token (compared in constant time).
pub(crate) fn csrf_matches(session: &Session, presented: &[u8]) -> bool {
    session.csrf.as_bytes().ct_eq(presented).into()
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// 32 random bytes, hex.
fn random_hex() -> Result<String, String> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("the OS gave no random bytes ({e})"))?;
    Ok(bytes.iter().fold(String::new(), |mut hex, byte| {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
        hex
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_names_its_caller_until_closed_or_its_token_is_revoked() -> Result<(), String> {
        let sessions = Sessions::default();
        let tenant = Caller {
            token_id: "ab12".into(),
            tenant: Some("acme".into()),
        };
        let (id, csrf) = sessions.open(tenant.clone())?;
        let (other, _) = sessions.open(Caller::operator())?;
        assert_ne!(id, csrf);
        let session = sessions.get(&id).ok_or("open")?;
        assert_eq!(session.caller, tenant);
        assert!(csrf_matches(&session, csrf.as_bytes()));
        assert!(!csrf_matches(&session, b"guess"));
        sessions.close(&id);
        assert!(sessions.get(&id).is_none(), "closed");
        assert!(sessions.get(&other).is_some(), "the other stays");
        sessions.close(&other);
        assert!(sessions.get(&other).is_none());
        Ok(())
    }

    #[test]
    fn a_cookie_is_found_among_others() {
        let header = "theme=dark; ruststream_session=abc; other=1";
        assert_eq!(cookie(header, COOKIE), Some("abc"));
        assert_eq!(cookie("ruststream_sessionx=1", COOKIE), None);
    }
}
