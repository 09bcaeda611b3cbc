//! The console's sign-in, the same on every host of a fleet.
//!
//! A token given once (`POST /ui/session`) opens a session. The session is a cookie
//! (`HttpOnly`, `SameSite=Strict`, `Secure` under TLS) that the page's script cannot read. It
//! holds whom the session was opened for (the operator, or a tenant token by its id), when it
//! opened and when it was last used, sealed with HMAC-SHA-256 under a key derived from the
//! operator's token; the token itself is kept in no cookie and no page. Every host with the
//! same operator token (a fleet given `RUSTSTREAM_ADMIN_TOKEN`) reads the cookie alike, so a
//! console behind a load balancer (the Kubernetes Service) keeps its session whichever host
//! answers, and no host keeps any session state.
//!
//! - A change asked in a session carries the session's CSRF token in `X-CSRF-Token`: an HMAC
//!   of the session under the same key, given only to the page that signed in (and to a page
//!   of the same origin reloading, `GET /ui/session`).
//! - A tenant token's session is looked up in the token store at every request, as a bearer
//!   token is: once the token is revoked, its sessions are signed out on every host.
//! - A session unused for [`IDLE`] ends, and none lasts past [`LIFETIME`]; a request that finds
//!   its cookie unused for [`RENEW_AFTER`] gets it back renewed.
//! - Signing out clears the cookie in the browser, and the host that signed it out refuses
//!   the session from then on. Another host of the fleet would still take a copy of the
//!   cookie taken before, until it is idle or old: no host keeps sessions, so none hears of
//!   the others' sign-outs. Revoking the tenant token, or changing the operator token, ends
//!   every session of it on every host at once.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use axum::http::HeaderMap;
use hmac::Mac as _;
use ruststream_common::sync::lock;
use sha2::Digest as _;

use super::token::AdminToken;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "ruststream_session";
/// The header a change asked in a session carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts without a request, in ms.
pub(crate) const IDLE: u64 = 30 * 60 * 1000;
/// How long a session lasts at most, in ms.
pub(crate) const LIFETIME: u64 = 12 * 60 * 60 * 1000;
/// How old a session's last use may get before a request renews its cookie, in ms.
pub(crate) const RENEW_AFTER: u64 = 60 * 1000;
/// What the cookie's value starts with: its format.
const VERSION: &str = "v1";
/// Sessions signed out on this host that are remembered at most (each until it would have
/// ended anyway); past it, the one that would end first is forgotten first.
const SIGNED_OUT_KEPT: usize = 4096;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// An open session, as its cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    /// Who signed in: [`Caller::OPERATOR`](super::caller::Caller::OPERATOR), or a tenant
    /// token's id.
    pub who: String,
    /// When it was opened, in ms since the epoch.
    pub opened_ms: u64,
    /// When it was last used (as of its cookie), in ms since the epoch.
    pub used_ms: u64,
}

/// Why a cookie opens no session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SessionEnded {
    /// It was not sealed with this key: forged, damaged, or sealed under another operator
    /// token.
    #[error(
        "the console's session is not one this host opened (or the admin token changed): sign in again"
    )]
    NotSealed,
    /// It was unused for longer than [`IDLE`].
    #[error("the console's session ended after 30 minutes unused: sign in again")]
    Idle,
    /// It is older than [`LIFETIME`].
    #[error("the console's session ended after 12 hours: sign in again")]
    Expired,
    /// It was signed out (on this host).
    #[error("the console's session was signed out: sign in again")]
    SignedOut,
}

/// Opens and reads sessions: the key every host of a fleet derives alike from the operator's
/// token.
pub(crate) struct Sessions {
    key: [u8; 32],
    /// The sessions signed out here, by (who, opened), with when each would have ended.
    signed_out: Mutex<HashMap<(String, u64), u64>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sessions { key: <redacted> }")
    }
}

impl Sessions {
    /// Sessions sealed under a key derived from `operator`'s token.
    pub(crate) fn new(operator: &AdminToken) -> Self {
        let mut hash = sha2::Sha256::new();
        hash.update(b"ruststream console sessions\0");
        hash.update(operator.secret().as_bytes());
        Self {
            key: hash.finalize().into(),
            signed_out: Mutex::default(),
        }
    }

    /// Refuses `session` on this host from now on.
    pub(crate) fn sign_out(&self, session: &Session, now_ms: u64) {
        let mut signed_out = lock(&self.signed_out);
        signed_out.retain(|_, ends_ms| *ends_ms > now_ms);
        if signed_out.len() >= SIGNED_OUT_KEPT
            && let Some(first) = (signed_out.iter())
                .min_by_key(|(_, ends_ms)| **ends_ms)
                .map(|(key, _)| key.clone())
        {
            signed_out.remove(&first);
        }
        let key = (session.who.clone(), session.opened_ms);
        signed_out.insert(key, session.opened_ms.saturating_add(LIFETIME));
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length: this cannot fail.
        <HmacSha256 as hmac::KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"))
    }

    /// The cookie value of a session for `who` opened at `now_ms`.
    pub(crate) fn open(&self, who: &str, now_ms: u64) -> String {
        self.seal(&Session {
            who: who.to_owned(),
            opened_ms: now_ms,
            used_ms: now_ms,
        })
    }

    /// The cookie value of `session`.
    fn seal(&self, session: &Session) -> String {
        let body = format!(
            "{VERSION}.{}.{}.{}",
            session.who, session.opened_ms, session.used_ms
        );
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        format!("{body}.{}", hex(&mac.finalize().into_bytes()))
    }

    /// The session a cookie value holds, at `now_ms`.
    ///
    /// # Errors
    /// It was not sealed with this key, or it ended ([`SessionEnded`]).
    pub(crate) fn read(&self, value: &str, now_ms: u64) -> Result<Session, SessionEnded> {
        let (body, tag) = value.rsplit_once('.').ok_or(SessionEnded::NotSealed)?;
        let tag = unhex(tag).ok_or(SessionEnded::NotSealed)?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&tag)
            .map_err(|_| SessionEnded::NotSealed)?;
        let mut parts = body.split('.');
        let (Some(VERSION), Some(who), Some(opened), Some(used), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(SessionEnded::NotSealed);
        };
        let (Ok(opened_ms), Ok(used_ms)) = (opened.parse::<u64>(), used.parse::<u64>()) else {
            return Err(SessionEnded::NotSealed);
        };
        if now_ms.saturating_sub(opened_ms) >= LIFETIME {
            return Err(SessionEnded::Expired);
        }
        if now_ms.saturating_sub(used_ms) >= IDLE {
            return Err(SessionEnded::Idle);
        }
        if lock(&self.signed_out).contains_key(&(who.to_owned(), opened_ms)) {
            return Err(SessionEnded::SignedOut);
        }
        Ok(Session {
            who: who.to_owned(),
            opened_ms,
            used_ms,
        })
    }

    /// A renewed cookie value for `session` when its last use is older than [`RENEW_AFTER`].
    pub(crate) fn renewed(&self, session: &Session, now_ms: u64) -> Option<String> {
        (now_ms.saturating_sub(session.used_ms) >= RENEW_AFTER).then(|| {
            self.seal(&Session {
                used_ms: now_ms,
                ..session.clone()
            })
        })
    }

    /// The CSRF token of `session`: the same for as long as it lasts, whichever host computes
    /// it.
    pub(crate) fn csrf(&self, session: &Session) -> String {
        let mut mac = self.mac();
        mac.update(format!("csrf.{}.{}", session.who, session.opened_ms).as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// Whether `presented` is `session`'s CSRF token (compared in constant time).
    pub(crate) fn csrf_matches(&self, session: &Session, presented: &[u8]) -> bool {
        let Some(tag) = std::str::from_utf8(presented).ok().and_then(unhex) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(format!("csrf.{}.{}", session.who, session.opened_ms).as_bytes());
        mac.verify_slice(&tag).is_ok()
    }
}

/// The `Set-Cookie` value carrying session `value`; `Secure` under TLS.
pub(crate) fn set_cookie(value: &str, tls: bool) -> String {
    let secure = if tls { "; Secure" } else { "" };
    format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        LIFETIME / 1000
    )
}

/// The `Set-Cookie` value that clears the session cookie.
pub(crate) fn clear_cookie(tls: bool) -> String {
    let secure = if tls { "; Secure" } else { "" };
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
}

/// The session cookie a request carries.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get(axum::http::header::COOKIE)?.to_str().ok()?;
    cookie(header, COOKIE)
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut hex, byte| {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
        hex
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    fn sessions(token: &str) -> Sessions {
        Sessions::new(&AdminToken::for_tests(token))
    }

    #[test]
    fn a_session_opened_on_one_host_is_read_on_another_with_the_same_token_only() {
        let (a, b, other) = (sessions("fleet"), sessions("fleet"), sessions("another"));
        let cookie = a.open("ab12cd34ef56", NOW);
        let read = b.read(&cookie, NOW + 1_000).expect("read on another host");
        assert_eq!(
            (read.who.as_str(), read.opened_ms, read.used_ms),
            ("ab12cd34ef56", NOW, NOW)
        );
        assert_eq!(a.csrf(&read), b.csrf(&read), "one CSRF token fleet-wide");
        assert!(b.csrf_matches(&read, a.csrf(&read).as_bytes()));
        assert!(!b.csrf_matches(&read, b"guess"));
        assert_eq!(
            other.read(&cookie, NOW),
            Err(SessionEnded::NotSealed),
            "another operator token"
        );
    }

    #[test]
    fn a_forged_or_changed_cookie_is_refused() {
        let sessions = sessions("fleet");
        let cookie = sessions.open("ab12cd34ef56", NOW);
        let as_operator = cookie.replacen("ab12cd34ef56", "operator", 1);
        let younger = cookie.replacen(&NOW.to_string(), &(NOW + 5).to_string(), 1);
        for forged in [
            as_operator.as_str(),
            younger.as_str(),
            "v1.operator.1.1.00",
            "v1.operator.1.1",
            "",
            "operator",
        ] {
            assert_eq!(
                sessions.read(forged, NOW),
                Err(SessionEnded::NotSealed),
                "{forged}"
            );
        }
        let other_session = sessions
            .read(&sessions.open("operator", NOW), NOW)
            .expect("read");
        let mine = sessions.read(&cookie, NOW).expect("read");
        assert!(
            !sessions.csrf_matches(&mine, sessions.csrf(&other_session).as_bytes()),
            "another session's CSRF token"
        );
    }

    #[test]
    fn a_session_ends_when_idle_or_old_and_is_renewed_when_used() {
        let sessions = sessions("fleet");
        let cookie = sessions.open("operator", NOW);
        assert_eq!(sessions.read(&cookie, NOW + IDLE), Err(SessionEnded::Idle));
        let read = sessions.read(&cookie, NOW + 10).expect("open");
        assert_eq!(sessions.renewed(&read, NOW + 10), None, "used just now");
        // Used every 20 minutes: renewed each time, it lasts until its lifetime.
        let mut cookie = cookie;
        let mut at = NOW;
        while at + 20 * 60 * 1000 < NOW + LIFETIME {
            at += 20 * 60 * 1000;
            let read = sessions.read(&cookie, at).expect("kept open by use");
            cookie = sessions.renewed(&read, at).expect("renewed");
        }
        assert_eq!(
            sessions.read(&cookie, NOW + LIFETIME),
            Err(SessionEnded::Expired)
        );
        let read = sessions.read(&cookie, at).expect("open");
        assert_eq!(read.opened_ms, NOW, "a renewal keeps when it opened");
    }

    #[test]
    fn a_session_signed_out_is_refused_here_in_every_renewal() {
        let sessions = sessions("fleet");
        let first = sessions.open("operator", NOW);
        let read = sessions.read(&first, NOW + RENEW_AFTER).expect("open");
        let renewed = sessions.renewed(&read, NOW + RENEW_AFTER).expect("renewed");
        let other = sessions.open("operator", NOW + 1);
        sessions.sign_out(&read, NOW + RENEW_AFTER);
        for cookie in [&first, &renewed] {
            assert_eq!(
                sessions.read(cookie, NOW + RENEW_AFTER),
                Err(SessionEnded::SignedOut)
            );
        }
        assert!(
            sessions.read(&other, NOW + 2).is_ok(),
            "another session stays"
        );
    }

    #[test]
    fn a_cookie_is_found_among_others() {
        let header = "theme=dark; ruststream_session=abc; other=1";
        assert_eq!(cookie(header, COOKIE), Some("abc"));
        assert_eq!(cookie("ruststream_sessionx=1", COOKIE), None);
    }
}
